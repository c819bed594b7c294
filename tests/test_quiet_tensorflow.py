"""No TensorFlow (absl, oneDNN, XLA) line reaches a user's terminal, on any CPU.

On some CPUs TensorFlow's libraries write an absl warning and a oneDNN notice to file
descriptor 2 while ``import tensorflow`` runs, which ``TF_CPP_MIN_LOG_LEVEL`` does not filter;
and XLA's persistent cache writes error-level notices when it loads a program compiled here.
These tests make such lines appear on any host (a stand-in ``tensorflow`` that writes natively
at import; ``TF_ENABLE_ONEDNN_OPTS=1``, which makes the real one print its oneDNN notice) and
check what the user sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RLGEN = Path(sys.executable).with_name("rlgen")  # the installed console script, as a user runs it
NATIVE = "I0000 00:00:1 12345 port.cc:153] a native line written at import"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "RLGEN_DEBUG", "RLGEN_TF_LOG")}
    return {**env, **extra}


def _stand_in(tmp_path: Path, fails: bool = False) -> Path:
    """A package named ``tensorflow`` that writes a line to descriptor 2 as its import runs."""
    package = tmp_path / "fake" / "tensorflow"
    package.mkdir(parents=True)
    body = f"import os\nos.write(2, {(NATIVE + chr(10)).encode()!r})\n"
    body += "raise ImportError('the stand-in is broken')\n" if fails else "VALUE = 42\n"
    (package / "__init__.py").write_text(body)
    return package.parent


def _python(code: str, fake: Path, **env: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(PYTHONPATH=path, **env), timeout=60
    )


IMPORT = "import rlgen.runtime, tensorflow; print(tensorflow.VALUE)"


def test_a_native_line_at_tensorflow_import_goes_to_the_run_log_not_the_terminal(tmp_path):
    fake = _stand_in(tmp_path)
    bare = _python("import tensorflow", fake)
    assert NATIVE in bare.stderr  # without rlgen the line reaches the terminal: the test can fail
    quiet = _python(IMPORT, fake)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "42\n", "")
    log = tmp_path / "launch.log"
    logged = _python(IMPORT, fake, RLGEN_TF_LOG=str(log))
    assert logged.stderr == "" and log.read_text() == NATIVE + "\n"  # kept beside the run's other lines


@pytest.mark.parametrize("switch", ["RLGEN_DEBUG", "RLGEN_TF_VERBOSE"])
def test_debug_and_verbose_show_the_native_lines_where_they_are_written(tmp_path, switch):
    r = _python(IMPORT, _stand_in(tmp_path), **{switch: "1"})
    assert r.returncode == 0 and NATIVE in r.stderr


def test_a_failed_import_shows_what_it_wrote(tmp_path):
    r = _python(IMPORT, _stand_in(tmp_path, fails=True))
    assert r.returncode == 1
    assert NATIVE in r.stderr and "the stand-in is broken" in r.stderr


def _onednn_notice_is_forced() -> None:
    r = subprocess.run(
        [sys.executable, "-c", "import tensorflow"],
        capture_output=True,
        text=True,
        env=_env(TF_ENABLE_ONEDNN_OPTS="1"),
        timeout=120,
    )
    assert "oneDNN" in r.stderr, f"TensorFlow printed no oneDNN notice here to test against: {r.stderr[-500:]!r}"


def test_run_and_eval_print_no_tensorflow_line_where_tensorflow_logs_at_import(tmp_path):
    _onednn_notice_is_forced()
    env = _env(TF_ENABLE_ONEDNN_OPTS="1", NO_COLOR="1", RLGEN_EVAL_PROCESS="spawn")
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [str(RLGEN), "run", str(ROOT / "examples" / "ppo-cartpole-ingraph.rl.yaml"), "--iterations", "3"]
        + ["--set", "train.eval.every=512", "--run-dir", str(run_dir), "--build-dir", str(tmp_path / "build")]
        + ["--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr == "" and "oneDNN" not in r.stdout
    assert "oneDNN" in (run_dir / "ranks" / "launch.log").read_text()  # kept with the run
    assert (run_dir / "ranks" / "eval.log").read_text() == ""  # the evaluator's own messages only
    for _ in range(2):  # the second loads XLA's cached programs, which logs on some CPUs
        r = subprocess.run(
            [str(RLGEN), "eval", str(run_dir), "--episodes", "2"], capture_output=True, text=True, env=env, timeout=300
        )
        assert (r.returncode, r.stderr) == (0, "")
        assert r.stdout.startswith(f"{run_dir}: 2 episodes, return ")
