"""The command line as users and CI call it: exit codes, formats, no tracebacks, no TensorFlow."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT

CORPUS = sorted((ROOT / "tests" / "corpus" / "invalid").glob("*.rl.yaml"))
PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"


def rlgen(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rlgen", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_version_and_help():
    from rlgen import __version__

    assert rlgen("--version").stdout.strip() == f"rlgen {__version__}"
    for sub in ("validate", "schema"):
        r = rlgen(sub, "--help")
        assert r.returncode == 0 and "usage: rlgen " + sub in r.stdout


def test_valid_examples_exit_0():
    r = rlgen("validate", *EXAMPLES)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": ok") == len(EXAMPLES)


def test_glob_is_expanded():
    r = rlgen("validate", "examples/*.rl.yaml")
    assert r.returncode == 0 and r.stdout.count(": ok") == len(EXAMPLES)


def test_an_existing_name_with_glob_characters_is_a_name(tmp_path):
    shutil.copy(PPO, tmp_path / "spec[1].rl.yaml")
    r = rlgen("validate", "spec[1].rl.yaml", cwd=tmp_path)
    assert r.returncode == 0 and "spec[1].rl.yaml: ok" in r.stdout, r.stdout + r.stderr
    r = rlgen("validate", "spec[2].rl.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "no files match 'spec[2].rl.yaml'" in r.stderr


def test_invalid_exit_1_with_compiler_style_output():
    bad = ROOT / "tests/corpus/invalid/06-misspelt-learner-key.rl.yaml"
    r = rlgen("validate", bad)
    assert r.returncode == 1
    assert f"{bad}:18:5: error[E202]: unknown key 'gama' (did you mean 'gamma'?)" in r.stdout
    assert "    gama: 0.98" in r.stdout and "^" in r.stdout


def test_every_error_of_every_file_is_reported():
    r = rlgen("validate", "--format", "json", *CORPUS[:5], PPO)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["valid"] is False
    assert {f["file"] for f in doc["files"] if not f["valid"]} == {str(p) for p in CORPUS[:5]}
    assert {d["file"] for d in doc["diagnostics"]} == {str(p) for p in CORPUS[:5]}
    assert all({"code", "line", "column", "path", "message", "hint"} <= d.keys() for d in doc["diagnostics"])


def test_github_annotations():
    bad = ROOT / "tests/corpus/invalid/06-misspelt-learner-key.rl.yaml"
    r = rlgen("validate", "--format", "github", bad)
    assert r.returncode == 1
    assert r.stdout.startswith(f"::error file={bad},line=18,col=5,title=rlgen E202::unknown key 'gama'")


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "does/not/exist.rl.yaml"),
        ("validate", "nothing/matches/*.rl.yaml"),
        ("validate",),
        ("validate", "--format", "xml", str(PPO)),
        ("frobnicate",),
    ],
)
def test_usage_and_io_errors_exit_2_without_traceback(args):
    r = rlgen(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip()


def test_directory_instead_of_file_is_an_io_error():
    r = rlgen("validate", "examples")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_no_traceback_for_any_corpus_file():
    r = rlgen("validate", *CORPUS)
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr


def test_deploy_overrides_are_checked():
    assert rlgen("validate", PPO, "--policy", "central-inference", "--workers", "3").returncode == 0
    r = rlgen("validate", PPO, "--policy", "central-inference", "--workers", "4")
    assert r.returncode == 1 and "E602" in r.stdout


def test_warnings_as_errors(tmp_path):
    spec = tmp_path / "w.rl.yaml"
    spec.write_text(re.sub(r"^networks:.*\n", "\\g<0>  unused: {kind: mlp}\n", PPO.read_text(), count=1, flags=re.M))
    assert rlgen("validate", spec).returncode == 0
    r = rlgen("validate", "-W", spec)
    assert r.returncode == 1 and "W320" in r.stdout


def test_schema_command_prints_the_schema():
    r = rlgen("schema")
    assert r.returncode == 0
    assert json.loads(r.stdout) == json.loads((ROOT / "schemas" / "rlgen.schema.json").read_text())


def test_validate_never_imports_tensorflow_or_horovod():
    code = (
        "import sys; from rlgen.cli import main; "
        f"rc = main(['validate', '-q', *{[str(e) for e in EXAMPLES]!r}]); "
        "bad = [m for m in ('tensorflow', 'horovod') if m in sys.modules]; "
        "print(rc, bad); sys.exit(1 if bad or rc else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_device_is_refused_and_a_fifo_without_writer_reads_empty_at_once(tmp_path):
    fifo = tmp_path / "spec.rl.yaml"
    os.mkfifo(fifo)  # no writer: opening it for reading must not wait for one
    for command in ("validate", "build"):
        start = time.perf_counter()
        r = rlgen(command, "/dev/zero")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "a character device, not a regular file or a pipe" in r.stderr and "Traceback" not in r.stderr
        r = rlgen(command, fifo)
        assert r.returncode == 1 and "E106" in r.stdout + r.stderr and "the file is empty" in r.stdout + r.stderr
        assert time.perf_counter() - start < 30


def test_a_spec_is_read_from_standard_input_and_from_a_pipe(tmp_path):
    text = PPO.read_text()
    r = subprocess.run([sys.executable, "-m", "rlgen", "validate", "-"], input=text, capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "<stdin>: ok\n"), r.stderr
    bad = text.replace("num_envs: 8", "num_envs: 7", 1)
    r = subprocess.run([sys.executable, "-m", "rlgen", "validate", "-"], input=bad, capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout.startswith("<stdin>:"), r.stdout  # located as in a file
    piped = f"{shlex.quote(sys.executable)} -m rlgen validate <(cat {shlex.quote(str(PPO))})"
    r = subprocess.run(["bash", "-c", piped], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.endswith(": ok\n"), r.stdout + r.stderr
    big = "#" * (2 << 20)
    r = subprocess.run([sys.executable, "-m", "rlgen", "validate", "-"], input=big, capture_output=True, text=True)
    assert r.returncode == 1 and "E105" in r.stdout  # the size cap holds for pipes too


def test_control_characters_in_a_file_name_are_escaped(tmp_path):
    odd = tmp_path / "a\x1b[31mb.rl.yaml"
    odd.write_text(PPO.read_text())
    r = rlgen("validate", odd)
    assert r.returncode == 0 and "\x1b" not in r.stdout and "a\\x1b[31mb.rl.yaml: ok" in r.stdout
    odd.write_text("x")
    r = rlgen("validate", odd)
    assert r.returncode == 1 and "\x1b" not in r.stdout + r.stderr


def test_huge_worker_counts_are_refused_at_once():
    start = time.perf_counter()
    r = rlgen("validate", PPO, "--policy", "multi-learner", "--workers", "1000000000")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "E208" in r.stdout and "maximum of 1024 (given by --workers)" in r.stdout
    r = rlgen("build", PPO, "--hosts", "h:99999999999")
    assert r.returncode == 1 and "E205" in r.stderr and "(given by --hosts)" in r.stderr
    assert time.perf_counter() - start < 60


@pytest.mark.parametrize("policy", ["single", "actors-learner", "central-inference", "multi-learner", "nope"])
@pytest.mark.parametrize("workers", [None, "1", "2", "3", "0", "100000000"])
def test_validate_build_and_graph_agree_on_every_override(tmp_path, capsys, policy, workers):
    """The same flags give the same verdict whichever command reads them (one way to apply them)."""
    from rlgen.cli import main

    flags = ["--policy", policy] + (["--workers", workers] if workers else [])
    codes = {
        "validate": main(["validate", "-q", str(PPO), *flags]),
        "build": main(["build", str(PPO), "-o", str(tmp_path / "b"), *flags]),
        "graph": main(["graph", str(PPO), "-o", str(tmp_path / "g.dot"), *flags]),
    }
    capsys.readouterr()
    assert len(set(codes.values())) == 1, codes
    assert codes["validate"] in (0, 1)
    if policy == "actors-learner" and workers is None:  # the policy's minimum, 2 workers, fits 8 envs
        assert codes["validate"] == 0


def test_a_message_never_quotes_a_whole_section(tmp_path):
    """Too many loop blocks: the error says how many, it does not print them all."""
    text = PPO.read_text()
    blocks = "".join(f"  b{i}: [actor.act(obs) -> a{i}]\n" for i in range(300))
    spec = tmp_path / "many.rl.yaml"
    spec.write_text(text.replace("  learn:\n", blocks + "  learn:\n"))
    start = time.perf_counter()
    r = rlgen("validate", spec)
    assert r.returncode == 1 and "E208" in r.stdout and "303 entries here, at most 256 allowed" in r.stdout
    assert len(r.stdout) < 2000 and time.perf_counter() - start < 30


def test_a_lag_for_a_policy_without_actors_is_a_warning(tmp_path):
    spec = tmp_path / "lag.rl.yaml"
    text = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
    spec.write_text(text.replace("  policy: single", "  policy: multi-learner\n  workers: 2\n  lag: 1"))
    r = rlgen("validate", spec)
    assert r.returncode == 0 and "warning[W605]" in r.stdout and "is ignored" in r.stdout
    assert rlgen("validate", "-W", spec).returncode == 1


def test_a_budget_of_partial_iterations_is_a_warning_that_says_what_runs():
    r = rlgen("validate", PPO, "--set", "train.total_steps=1000")
    assert r.returncode == 0 and "warning[W705]" in r.stdout
    assert "stops after 3 iterations, 768 env steps" in r.stdout and "use 768 or 1024" in r.stdout
    assert "W705" not in rlgen("validate", PPO, "--set", "train.total_steps=1024").stdout


@pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz's dot is not installed (scripts/setup.sh installs it as root)"
)
def test_graph_draws_svg_and_png(tmp_path):
    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    for fmt, magic in (("svg", b"<?xml"), ("png", b"\x89PNG")):
        out = tmp_path / f"fdg.{fmt}"
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlgen",
                "graph",
                str(spec),
                "--format",
                fmt,
                "--policy",
                "central-inference",
                "--workers",
                "2",
                "-o",
                str(out),
            ],
            capture_output=True,
        )
        assert r.returncode == 0, r.stderr
        assert out.read_bytes().startswith(magic) and out.stat().st_size > 2000


def test_graph_without_graphviz_says_how_to_install_it(tmp_path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # the venv's tools, no `dot`
    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "graph", str(spec), "--format", "svg"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 2 and "apt-get install graphviz" in r.stderr and "Traceback" not in r.stderr
