"""What a run does when something goes wrong around it, through the installed ``rlgen`` command
as a user runs it: a scheduler's SIGTERM, a second signal, a second trainer on the same run
directory, a damaged checkpoint, a full disk, a spec's own module beside it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

RLGEN = Path(sys.executable).with_name("rlgen")  # the console script, not python -m
PPO = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
pytestmark = pytest.mark.skipif(
    not Path(sys.executable).with_name("horovodrun").exists(), reason="horovodrun not installed (scripts/setup.sh)"
)


def spec(tmp_path: Path, checkpoint_every: int = 20000) -> Path:
    text = re.sub(r"total_steps: \d+", "total_steps: 10000000", PPO)
    text = re.sub(r"stop: \{[^}]*\}", "stop: {}", text)
    text = re.sub(r"checkpoint: \{every: \d+", f"checkpoint: {{every: {checkpoint_every}", text)
    text = re.sub(r"eval: \{every: \d+", "eval: {every: 0", text)
    path = tmp_path / "ppo.rl.yaml"
    path.write_text(text)
    return path


def rlgen(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [str(RLGEN), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def start(*args, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(RLGEN), *map(str, args)],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows(run_dir: Path) -> list[dict]:
    """The metrics rows; every line must be a whole row."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def wait_for_rows(run_dir: Path, count: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            if len((run_dir / "metrics.jsonl").read_text().splitlines()) >= count:
                return
        time.sleep(0.2)
    raise AssertionError(f"no {count} metrics rows in {timeout} s")


def finish(proc: subprocess.Popen, timeout: float = 90) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("policy", "workers"), [("single", 1), ("actors-learner", 2)])
def test_sigterm_stops_a_run_as_ctrl_c_does_and_a_second_trainer_is_refused_meanwhile(tmp_path, policy, workers):
    run_dir = tmp_path / "run"
    proc = start("run", spec(tmp_path), "--policy", policy, "--workers", workers, "--run-dir", run_dir, cwd=tmp_path)
    wait_for_rows(run_dir, 3)
    second = rlgen("run", "--resume", run_dir, "--iterations", "2", cwd=tmp_path)  # a scheduler's relaunch
    assert second.returncode == 2, second.stderr
    assert re.match(rf"rlgen run: error: run directory {re.escape(str(run_dir))} is in use by rlgen run \(pid "
                    rf"{proc.pid} on ", second.stderr), second.stderr  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    out, err = finish(proc)
    assert proc.returncode == 143, err[-2000:]  # stopped cleanly, and a scheduler can tell it did not finish
    assert "terminated: " in out and "done (terminated)" in out and err == ""
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "terminated" and doc["stop_reason"] == "terminated"
    state = json.loads((run_dir / "state.json").read_text())  # the final checkpoint, at the last row
    assert state["env_steps"] == rows(run_dir)[-1]["env_steps"]
    r = rlgen("run", "--resume", run_dir, "--iterations", 2, "--quiet", cwd=tmp_path)  # 2 more
    assert r.returncode == 0, r.stderr
    assert rows(run_dir)[-1]["iteration"] == state["iteration"] + 2


@pytest.mark.parametrize(("policy", "workers"), [("single", 1), ("actors-learner", 2)])
def test_a_second_ctrl_c_aborts_with_130(tmp_path, policy, workers):
    run_dir = tmp_path / "run"
    proc = start("run", spec(tmp_path), "--policy", policy, "--workers", workers, "--run-dir", run_dir, cwd=tmp_path)
    wait_for_rows(run_dir, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = finish(proc)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err


def test_resume_goes_past_damaged_checkpoints_and_sets_them_aside(tmp_path):
    run_dir = tmp_path / "run"
    r = rlgen("run", spec(tmp_path, 2048), "--iterations", 30, "--run-dir", run_dir, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ckpts = run_dir / "checkpoints"
    kept = sorted(int(p.name[5:-6]) for p in ckpts.glob("ckpt-*.index"))
    assert kept == [4096, 6144, 7680]  # keep: 3 (every 2048 env steps, and the final one)
    data = next(ckpts.glob("ckpt-7680.data*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated, as a full disk or a crash leaves it
    (ckpts / "checkpoint").unlink()  # TensorFlow's own index of them, gone too
    r = rlgen("run", "--resume", run_dir, "--iterations", 3, cwd=tmp_path)  # from iteration 24: 3 more
    assert r.returncode == 0, r.stderr
    assert "skipped unusable checkpoint(s)" in r.stdout and "ckpt-7680" in r.stdout
    assert "resumed from" in r.stdout and "at 6144 env steps" in r.stdout
    assert sorted(p.name for p in (ckpts / "damaged").iterdir())[0].startswith("ckpt-7680")
    assert [row["iteration"] for row in rows(run_dir)][-1] == 27
    now = sorted(int(p.name[5:-6]) for p in ckpts.glob("ckpt-*.index"))
    assert now == [4096, 6144, 6912]  # the damaged one holds no keep slot
    for index in ckpts.glob("ckpt-*.index"):  # every checkpoint damaged: said in one line
        for part in ckpts.glob(index.name.replace(".index", ".data*")):
            part.write_bytes(b"")
    r = rlgen("run", "--resume", run_dir, "--iterations", 1, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("rlgen run: error: training failed: --resume: no intact checkpoint in")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_the_installed_command_imports_the_users_own_modules_under_single(tmp_path):
    shutil.copy(ROOT / "examples" / "custom-network.rl.yaml", tmp_path)
    shutil.copy(ROOT / "examples" / "custom_nets.py", tmp_path)
    r = rlgen("run", "custom-network.rl.yaml", "--iterations", 2, "--run-dir", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "build").exists()  # the build is the run's: in its directory, named on the last line
    assert (tmp_path / "run" / "build" / "single-1" / "plan.json").is_file()
    assert r.stdout.rstrip().endswith(f"run directory {tmp_path / 'run'} (build run/build/single-1)")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB filesystem of its own (tmpfs, as root), to fill."""
    mount = tmp_path / "disk"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): a full disk cannot be made")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> None:
    """Take every free byte of ``mount`` (unbuffered writes: a full disk fails the write, not a
    later flush)."""
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


def test_a_full_disk_fails_the_run_saying_so_and_keeps_every_file_whole(tmp_path, small_disk):
    run_dir = small_disk / "run"
    proc = start("run", spec(tmp_path, 1024), "--run-dir", run_dir, "--quiet", cwd=tmp_path)
    wait_for_rows(run_dir, 5)
    fill(small_disk)
    out, err = finish(proc)
    assert proc.returncode == 1, (out, err)
    assert err.startswith("rlgen run: error: training failed: no space left on the device"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    rows(run_dir)  # every row whole
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "failed" and "no space left on the device" in doc["error"]
    state = json.loads((run_dir / "state.json").read_text())
    assert (run_dir / "checkpoints" / f"{state['checkpoint']}.index").is_file()  # the last good checkpoint
    (small_disk / "filler").unlink()  # space again: the run goes on from it
    r = rlgen("run", "--resume", run_dir, "--iterations", 1, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_a_lost_gloo_connection_is_another_ranks_failure_seen_from_here():
    """Gloo's "connection reset by peer" on a survivor must not be taken as the cause of a
    killed rank: the launcher waits for the killed rank's own report."""
    import tensorflow as tf

    from rlgen.runtime.channels import PeerLost
    from rlgen.runtime.failures import failure_reason, peer_gone

    gloo = tf.errors.UnknownError(
        None,
        None,
        "{{function_node __inference_function_1785}} [/tmp/x/gloo/transport/tcp/pair.cc:589] "
        "Read error [127.0.0.1]:17805: Connection reset by peer",
    )
    assert peer_gone(gloo) and peer_gone(PeerLost(1))
    assert "another rank" in failure_reason(gloo) and "function_node" not in failure_reason(gloo)
    assert failure_reason(PeerLost(1)) == "PeerLost: rank 1 closed its connection (it failed or was killed)"
    assert not peer_gone(ValueError("observation has the wrong shape"))
    assert not peer_gone(OSError(28, "No space left on device"))
