"""The ``agent-groups`` policy: the env on rank 0, each agent group's fragment on its own rank.

Builds are checked for placement and seeding; a short run of examples/mappo-simple-tag.rl.yaml
must log exactly ``single``'s metrics for the same seed (timings aside)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT, rank_pid

EXAMPLE = ROOT / "examples" / "mappo-simple-tag.rl.yaml"
GROUP_VALUES = {
    "send": ["action_adv", "action_good"],
    "receive": [
        *(f"{v}_adv" for v in ("next_obs", "reward", "terminated", "truncated", "next_state")),
        *(f"{v}_good" for v in ("next_obs", "reward", "terminated", "truncated", "next_state")),
    ],
}


def spec(
    tmp_path: Path, policy: str = "agent-groups", workers: int = 3, name: str = "tag", checkpoint: int | None = None
) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    assert data["partitions"]["env"] == {"at": "env.step", **GROUP_VALUES}  # the example cuts where agent-groups does
    data["deploy"] = {"policy": policy, "workers": workers}
    data["train"].pop("checkpoint", None)
    if checkpoint:
        data["train"]["checkpoint"] = {"every": checkpoint, "keep": 3}
    path = tmp_path / f"{name}.rl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def rlgen(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "rlgen", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_each_group_runs_on_its_own_rank_and_samples_as_single(tmp_path):
    r = rlgen("build", spec(tmp_path), "-o", tmp_path / "b", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "b" / "plan.json").read_text())
    assert {r["rank"]: (r["role"], tuple(r["fragments"])) for r in plan["ranks"]} == {
        0: ("env", ("env_worker",)),
        1: ("adversaries", ("adversaries",)),
        2: ("good", ("good",)),
    }
    dot = (tmp_path / "b" / "fdg.dot").read_text()
    assert "role adversaries: ranks [1]" in dot and "role good: ranks [2]" in dot
    pkg = tmp_path / "b" / "mappo_simple_tag"
    good = (pkg / "good.py").read_text()
    assert "replica_seed(seed, 0)" in good  # rank 0's streams, as under single
    assert "seed=stream + 104" in good and "seed=stream + 107" in good  # single's numbering
    assert "actor_adv" not in good
    single = rlgen("build", spec(tmp_path, "single", 1, "one"), "-o", tmp_path / "s", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    agent = (tmp_path / "s" / "mappo_simple_tag" / "agent.py").read_text()
    assert "seed=stream + 104" in agent and "seed=stream + 107" in agent


def test_agent_groups_needs_groups_and_one_rank_per_group(tmp_path):
    r = rlgen("validate", spec(tmp_path, workers=2), cwd=tmp_path)
    assert r.returncode == 1 and "E601" in r.stdout + r.stderr
    r = rlgen("validate", ROOT / "examples" / "ppo-cartpole.rl.yaml", "--policy", "agent-groups", cwd=tmp_path)
    assert r.returncode == 1 and "E610" in r.stdout + r.stderr


@pytest.mark.skipif(
    not (Path(sys.executable).with_name("horovodrun")).exists(), reason="horovodrun not installed (scripts/setup.sh)"
)
def test_metrics_and_evaluations_equal_single_for_the_same_seed(tmp_path):
    """With periodic evaluation on: rank 0 evaluates (in its evaluator process) and exports its
    copy of the groups' policies, given each group's weights at that point, so the evaluation
    rows, the exported policy and ``rlgen eval``'s figures are single's for the same seed."""
    pytest.importorskip("mpe2.simple_tag_v3")
    runs, exported = {}, {}
    for policy, workers in (("single", 1), ("agent-groups", 3)):
        run_dir = tmp_path / policy
        path = spec(tmp_path, policy, workers, policy.replace("-", "_"))
        args = ("--set", "env.num_envs=4", "--set", "train.eval.every=200", "--set", "train.eval.episodes=3")
        r = rlgen("run", path, *args, "--iterations", 3, "--run-dir", run_dir, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        timing = ("time", "steps_per_s")
        runs[policy] = [
            {k: v for k, v in json.loads(line).items() if k not in timing and "time_" not in k} for line in lines
        ]
        exported[policy] = _policy_weights(run_dir / "policy")
        out = rlgen("eval", run_dir, "--json", "--episodes", 3, "--seed", 5, cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr[-3000:]
        exported[policy]["rlgen eval"] = json.loads(out.stdout)
    assert len(runs["single"]) == 3
    assert "adversaries/loss" in runs["agent-groups"][0] and "good/return" in runs["agent-groups"][-1]
    evaluated = [row for row in runs["agent-groups"] if "eval_mean_return" in row]
    assert [row["eval_env_steps"] for row in evaluated] == [200]
    assert "adversaries/eval_return" in evaluated[0] and "good/eval_return" in evaluated[0]
    assert runs["agent-groups"] == runs["single"]
    run = json.loads((tmp_path / "agent-groups" / "run.json").read_text())
    assert run["best_eval"]["env_steps"] == 200 and run["final_eval"]  # the closing one, at 300 steps
    assert (tmp_path / "agent-groups" / "policy-best" / "saved_model.pb").is_file()
    # the exported policy holds the groups' trained weights (not rank 0's untrained copy's)
    ours, theirs = exported["agent-groups"], exported["single"]
    assert sorted(ours) == sorted(theirs) and len(ours) > 10
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)  # rlgen eval's figures too


def _policy_weights(policy_dir: Path) -> dict:
    """The exported policy's weights (every group's), by their place in the SavedModel: its
    variables less the sampling generators' states (deterministic actions use none)."""
    import tensorflow as tf

    path = str(policy_dir / "variables" / "variables")
    reader = tf.train.load_checkpoint(path)
    names = [n for n, _ in tf.train.list_variables(path) if n.endswith("VARIABLE_VALUE") and "generator" not in n]
    return {n: reader.get_tensor(n) for n in names}


@pytest.mark.skipif(
    not (Path(sys.executable).with_name("horovodrun")).exists(), reason="horovodrun not installed (scripts/setup.sh)"
)
def _saved_by_all(checkpoints: Path) -> list[str]:
    """Checkpoints (``ckpt-<steps>``) that rank 0 and both groups have saved."""
    mine = {p.name.removesuffix(".state.json") for p in checkpoints.glob("ckpt-*.state.json")}
    for group in ("adversaries", "good"):
        mine &= {p.name.removesuffix(".index") for p in (checkpoints / group).glob("ckpt-*.index")}
    return sorted(mine, key=lambda name: int(name.split("-")[1]))


def test_a_killed_group_rank_ends_the_job_with_a_clear_error_and_resumes_from_its_checkpoints(tmp_path):
    pytest.importorskip("mpe2.simple_tag_v3")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec(tmp_path, checkpoint=200)), "--set", "env.num_envs=4"]
    proc = subprocess.Popen(
        [*cmd, "--iterations", "1000", "--run-dir", str(run_dir), "--quiet"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.monotonic() + 300
        path = run_dir / "metrics.jsonl"
        while not (path.exists() and len(path.read_text().splitlines()) >= 2) or not _saved_by_all(
            run_dir / "checkpoints"
        ):
            assert time.monotonic() < end and proc.poll() is None, "no metric lines and checkpoints"
            time.sleep(0.2)
        os.kill(rank_pid("mappo_simple_tag.main", 2), signal.SIGKILL)  # the `good` group's rank
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - killed < 20
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.startswith("rlgen run: error: rank 2 died without reporting an error"), err
    assert err.count("\n") == 1, err  # one line: no TensorFlow log lines, no tracebacks
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    # the last checkpoint every rank saved is kept, and the run goes on from it
    kept = _saved_by_all(run_dir / "checkpoints")
    assert kept
    r = rlgen("run", "--resume", run_dir, "--iterations", 2, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    steps = int(kept[-1].split("-")[1])
    assert f"resumed from {run_dir / 'checkpoints' / kept[-1]} at {steps} env steps" in r.stdout
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["env_steps"] == steps + 200
    done = [json.loads((run_dir / "ranks" / f"{rank}.done").read_text()) for rank in (1, 2)]
    assert all(d["iteration"] == steps // 100 + 2 and d["weights_sha256"] for d in done)
