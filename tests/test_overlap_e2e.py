"""Overlapped and asynchronous actors, and pipelined inference, end to end: real Horovod ranks,
real channels, real envs.

The bound on how old the weights may be that learned-from experience was collected with
(``deploy.lag``) is checked from what the learner logs (``policy_lag``, per iteration).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

PPO = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
pytestmark = pytest.mark.skipif(
    not (Path(sys.executable).with_name("horovodrun")).exists(), reason="horovodrun not installed (scripts/setup.sh)"
)


def spec(tmp_path: Path, policy: str, workers: int, lag: int | None = None, **train) -> Path:
    """The PPO CartPole example under ``policy``; ``train`` replaces settings by key."""
    deploy = f"  policy: {policy}\n  workers: {workers}" + (f"\n  lag: {lag}" if lag is not None else "")
    text = PPO.replace("  policy: single", deploy)
    text = re.sub(r"eval: \{every: \d+", "eval: {every: 0", text)
    for key, value in train.items():
        text = re.sub(rf"{key}: [^\n]*", f"{key}: {value}", text, count=1)
    path = tmp_path / f"{policy}-{workers}-{lag}.rl.yaml"
    path.write_text(text)
    return path


def run(tmp_path: Path, path: Path, *args, timeout: float = 300) -> tuple[subprocess.CompletedProcess, list[dict]]:
    run_dir = tmp_path / f"run-{path.name.removesuffix('.rl.yaml')}"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(path), "--run-dir", str(run_dir), "--quiet", *map(str, args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return r, rows


def test_overlapped_actors_learn_from_weights_exactly_lag_updates_old_and_repeat_themselves(tmp_path):
    r, rows = run(tmp_path, spec(tmp_path, "actors-learner", 3), "--iterations", 30)
    assert r.returncode == 0, r.stderr[-3000:]
    # the first rollout uses the initial weights; every later one weights one update old, even
    # when the learner was quick enough for a newer version to have arrived
    assert [row["policy_lag"] for row in rows] == [0] + [1] * 29
    again = tmp_path / "again"
    again.mkdir()
    r, repeat = run(again, spec(again, "actors-learner", 3), "--iterations", 30)
    assert r.returncode == 0, r.stderr[-3000:]
    keys = ("env_steps", "episodes", "mean_return", "policy_loss", "value_loss")
    assert [[row[k] for k in keys] for row in repeat] == [[row[k] for k in keys] for row in rows]
    r, rows = run(tmp_path, spec(tmp_path, "actors-learner", 3, lag=0), "--iterations", 10)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {row["policy_lag"] for row in rows} == {0}  # lag 0: lockstep


def test_asynchronous_actors_drop_what_is_too_stale_and_report_it(tmp_path):
    r, rows = run(tmp_path, spec(tmp_path, "async-actors", 3, lag=0), "--iterations", 30)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {row["policy_lag"] for row in rows} == {0}
    assert rows[-1]["dropped"] > 0  # two actors never wait: one of them is always ahead
    assert rows[-1]["env_steps"] == 30 * 256 and rows[-1]["episodes"] > 0
    r, rows = run(tmp_path, spec(tmp_path, "async-actors", 2), "--iterations", 30)
    assert r.returncode == 0, r.stderr[-3000:]
    assert max(row["policy_lag"] for row in rows) <= 4


def test_asynchronous_actors_learn_cartpole(tmp_path):
    """Return rises well above random play (about 22) within 40k steps, as under single."""
    r, rows = run(tmp_path, spec(tmp_path, "async-actors", 2, total_steps=40960, stop="{}"), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert rows[-1]["mean_return"] >= 150, [row["mean_return"] for row in rows[::20]]


def test_pipelined_inference_learns_cartpole_and_reproduces_itself(tmp_path):
    """2 env workers, each stepping 2 groups of 2 envs while the learner acts for the others:
    a group whose results were matched with another group's observations would not learn."""
    r, rows = run(tmp_path, spec(tmp_path, "pipelined-inference", 3, total_steps=40960, stop="{}"), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert rows[-1]["mean_return"] >= 150, [row["mean_return"] for row in rows[::20]]
    assert rows[-1]["time_inference"] > 0 and rows[-1]["rest_time_env"] > 0
    again = tmp_path / "again"
    again.mkdir()
    r, repeat = run(again, spec(again, "pipelined-inference", 3, total_steps=40960, stop="{}"), "--iterations", 8)
    assert r.returncode == 0, r.stderr[-3000:]
    keys = ("env_steps", "episodes", "mean_return", "policy_loss", "value_loss")
    assert [[row[k] for k in keys] for row in repeat] == [[row[k] for k in keys] for row in rows[:8]]


def test_a_killed_asynchronous_actor_ends_the_job_and_keeps_the_checkpoint(tmp_path):
    path = spec(tmp_path, "async-actors", 3, checkpoint="{every: 256, keep: 3}")
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlgen", "run", str(path), "--run-dir", str(run_dir), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and not (run_dir / "state.json").exists():
            time.sleep(0.2)
        pid = int((run_dir / "ranks" / "2.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - killed < 30
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.startswith("rlgen run: error: rank 2 died without reporting an error"), err
    state = json.loads((run_dir / "state.json").read_text())
    assert (run_dir / "checkpoints" / f"{state['checkpoint']}.index").is_file()


def test_the_learner_rank_evaluates_in_a_process_of_its_own_as_the_loop_would(tmp_path):
    """Rank 0 (here the learner) forks its evaluator before Horovod starts; the evaluator builds
    its copy of the policy by the learner's role and evaluates the same snapshots to the same
    returns as evaluation in the loop (exact lag makes the two runs train alike)."""
    results = {}
    for name, env in (("loop", {"RLGEN_EVAL_PROCESS": "0"}), ("process", {})):
        where = tmp_path / name
        where.mkdir()
        path = spec(where, "actors-learner", 2)
        path.write_text(re.sub(r"eval: \{every: 0", "eval: {every: 1024", path.read_text()))
        run_dir = where / "run"
        cmd = [sys.executable, "-m", "rlgen", "run", str(path), "--run-dir", str(run_dir), "--quiet"]
        r = subprocess.run(
            [*cmd, "--iterations", "9"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **env},
        )
        assert r.returncode == 0, r.stderr[-3000:]
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        evals = [(row["eval_env_steps"], row["eval_mean_return"]) for row in rows if "eval_mean_return" in row]
        results[name] = (evals, json.loads((run_dir / "run.json").read_text()), run_dir)
    (loop, _, _), (proc, doc, run_dir) = results["loop"], results["process"]
    assert len(loop) >= 2 and proc == loop
    assert doc["eval_process"] == "forked"
    assert "evaluator:" not in (run_dir / "ranks" / "eval.log").read_text()  # it never failed over to the loop
    assert (run_dir / "policy-best" / "saved_model.pb").is_file()
