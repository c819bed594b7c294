"""`rlgen run --hosts` across two real hosts (network namespaces with sshd, tests/hostsupport.py).

Every distributed policy trains PPO CartPole with rank 0 on one host and rank 1 on the
other, launched from this machine (which is neither). The five failures of issue 12 are
caused for real (a host's link pulled, a rank SIGKILLed on its host, the venv hidden on a
host, too few slots) and each must end within 30 s naming the host and the rank, with the
last checkpoint intact and ``--resume`` working once the host is back. Skipped, with the
reason, where the machine cannot host them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostsupport import TestHosts

from rlgen.app.bench import speed_only

from conftest import ROOT

#: The issue's bound for every failure, from the fault to rlgen's exit.
FAILURE_BOUND_S = 30.0
POLICIES = ["actors-learner", "async-actors", "central-inference", "multi-learner"]
ITERATIONS = 4


def _spec(tmp: Path, checkpoint_every: int = 20000) -> Path:
    return speed_only(ROOT / "examples" / "ppo-cartpole.rl.yaml", tmp, checkpoint_every)


def _args(spec: Path, tmp: Path, policy: str, run_dir: Path, hosts: str | None) -> list[str]:
    args = [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", policy, "--workers", "2"]
    args += ["--build-dir", str(tmp / f"build-{policy}-{'hosts' if hosts else 'local'}"), "--run-dir", str(run_dir)]
    return [*args, "--quiet"] + (["--hosts", hosts] if hosts else [])


def _rlgen(hosts: TestHosts, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, env=hosts.run_env(), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _returns(run_dir: Path) -> list[tuple]:
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["env_steps"], r.get("mean_return"), r.get("loss"), r.get("policy_loss")) for r in rows]


@pytest.fixture(scope="module")
def trained(testhosts: TestHosts, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run per policy across the two hosts (rank 0 on the first, rank 1 on the second)."""
    tmp = tmp_path_factory.mktemp("across")
    spec = _spec(tmp)
    runs = {}
    for policy in POLICIES:
        run_dir = tmp / f"run-{policy}"
        r = _rlgen(
            testhosts, [*_args(spec, tmp, policy, run_dir, testhosts.hosts_arg()), "--iterations", str(ITERATIONS)]
        )
        assert r.returncode == 0, f"{policy}: {r.stderr[-3000:]}"
        runs[policy] = run_dir
    return runs


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_trains_across_two_hosts(trained: dict[str, Path], testhosts: TestHosts, policy: str) -> None:
    run_dir = trained[policy]
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "finished"
    # each rank says where it ran: its own host's name, not this machine's
    assert [doc["ranks"][str(r)]["host"] for r in range(2)] == testhosts.names
    assert doc["cluster"]["hosts"] == testhosts.hosts_arg().split(",")
    # metrics, checkpoints and the exported policy are on the launching host
    assert len(_returns(run_dir)) == ITERATIONS
    assert any((run_dir / "checkpoints").glob("ckpt-*.index"))
    assert (run_dir / "policy" / "saved_model.pb").is_file()


def test_eval_runs_a_policy_trained_across_hosts(trained: dict[str, Path], testhosts: TestHosts) -> None:
    r = _rlgen(testhosts, [sys.executable, "-m", "rlgen", "eval", str(trained["actors-learner"]), "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["episodes"] == 10


def test_two_host_multi_learner_matches_one_host(
    trained: dict[str, Path], testhosts: TestHosts, tmp_path: Path
) -> None:
    """Same seed, same ranks: the returns and losses do not depend on where the ranks run."""
    spec = _spec(tmp_path)
    here = tmp_path / "run-local"
    r = _rlgen(testhosts, [*_args(spec, tmp_path, "multi-learner", here, None), "--iterations", str(ITERATIONS)])
    assert r.returncode == 0, r.stderr[-3000:]
    assert _returns(here) == _returns(trained["multi-learner"])


def _start_and_wait_for_a_checkpoint(testhosts: TestHosts, tmp: Path, run_dir: Path) -> subprocess.Popen:
    spec = _spec(tmp, checkpoint_every=1024)
    proc = subprocess.Popen(
        [*_args(spec, tmp, "actors-learner", run_dir, testhosts.hosts_arg()), "--iterations", "400"],
        env=testhosts.run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while not any((run_dir / "checkpoints").glob("ckpt-*.index")):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 180 s"
        time.sleep(0.2)
    time.sleep(1.0)  # into training, past the first checkpoint
    return proc


def _ended(proc: subprocess.Popen, fault_at: float) -> tuple[float, str]:
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("rlgen run still running 60 s after the fault")
    assert proc.returncode == 1, err[-3000:]
    return time.monotonic() - fault_at, err


def _checkpoints(run_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (run_dir / "checkpoints").glob("ckpt-*")}


def _resume(testhosts: TestHosts, run_dir: Path, iterations: int) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "rlgen", "run", "--resume", str(run_dir), "--iterations", str(iterations), "--quiet"]
    return _rlgen(testhosts, args)


def _steps(run_dir: Path) -> int:
    return max(int(p.name.split("-")[1].split(".")[0]) for p in (run_dir / "checkpoints").glob("ckpt-*.index"))


def test_rank_killed_on_a_remote_host_then_a_host_without_the_project(testhosts: TestHosts, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _start_and_wait_for_a_checkpoint(testhosts, tmp_path, run_dir)
    pid = (run_dir / "ranks" / "1.pid").read_text().strip()
    killed = time.monotonic()
    assert testhosts.script("exec", testhosts.names[1], "kill", "-9", pid).returncode == 0
    took, err = _ended(proc, killed)
    assert took < FAILURE_BOUND_S, err
    assert f"rank 1 on host {testhosts.addrs[1]} ({testhosts.names[1]}) died" in err, err
    kept = _checkpoints(run_dir)
    assert kept

    # resuming on a host where the project is missing fails before anything starts
    venv = str(Path(sys.executable).parent.parent)
    assert testhosts.script("hide", testhosts.names[1], venv).returncode == 0
    try:
        started = time.monotonic()
        r = _resume(testhosts, run_dir, 30)
        assert time.monotonic() - started < FAILURE_BOUND_S
    finally:
        assert testhosts.script("unhide", testhosts.names[1], venv).returncode == 0
    assert r.returncode == 1
    assert f"host {testhosts.addrs[1]} (rank 1) has no {sys.executable}" in r.stderr, r.stderr
    assert _checkpoints(run_dir) == kept, "a failed start touched the checkpoints"

    before = _steps(run_dir)
    r = _resume(testhosts, run_dir, before // 256 + 4)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(run_dir) > before
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_link_down_mid_run_then_an_unreachable_host(testhosts: TestHosts, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _start_and_wait_for_a_checkpoint(testhosts, tmp_path, run_dir)
    cut = time.monotonic()
    assert testhosts.script("link", testhosts.names[1], "down").returncode == 0
    try:
        took, err = _ended(proc, cut)
        assert took < FAILURE_BOUND_S, err
        assert f"rank 1 on host {testhosts.addrs[1]} ({testhosts.names[1]}) has not been heard from" in err, err
        kept = _checkpoints(run_dir)
        assert kept
        started = time.monotonic()
        r = _resume(testhosts, run_dir, 30)  # the host is still unreachable
        assert time.monotonic() - started < FAILURE_BOUND_S
        assert r.returncode == 1
        assert f"host {testhosts.addrs[1]} (rank 1) cannot be reached over ssh" in r.stderr, r.stderr
        assert _checkpoints(run_dir) == kept
    finally:
        assert testhosts.script("link", testhosts.names[1], "up").returncode == 0
    before = _steps(run_dir)
    r = _resume(testhosts, run_dir, before // 256 + 4)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(run_dir) > before


def test_too_few_slots_is_refused_before_anything_starts(testhosts: TestHosts, tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    args = _args(spec, tmp_path, "actors-learner", tmp_path / "run", testhosts.hosts_arg())
    args[args.index("--workers") + 1] = "3"
    started = time.monotonic()
    r = _rlgen(testhosts, args)
    assert time.monotonic() - started < FAILURE_BOUND_S
    assert r.returncode == 1
    assert f"the hosts ({testhosts.hosts_arg().replace(',', ', ')}) offer 2 slot(s) for 3 workers" in r.stderr
    assert "rank 2 would have none" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()
