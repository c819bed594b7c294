"""Evaluating multi-agent policies: evaluation episodes on real mpe2 envs (host and in-graph),
their figures against the training episodes' own definitions, ``train.eval`` in a multi-agent
run, and ``rlgen eval`` on trained MAPPO runs (one group and several, shared and per-agent
networks), with videos."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT

pytest.importorskip("mpe2.simple_spread_v3")

from rlgen.runtime.agents import ParallelVectorEnv  # noqa: E402
from rlgen.runtime.evaluation.agents import evaluate_agents, in_graph_agents  # noqa: E402

EXAMPLES = ROOT / "examples"
SPREAD = {"pettingzoo": "mpe2.simple_spread_v3", "kwargs": {"N": 3, "max_cycles": 25, "continuous_actions": False}}
TAG_GROUPS = {"adversaries": ["adversary_0", "adversary_1", "adversary_2"], "good": ["agent_0"]}
TAG = {
    "pettingzoo": "mpe2.simple_tag_v3",
    "kwargs": {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 25, "continuous_actions": False},
    "groups": TAG_GROUPS,
}


def rlgen(*args, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlgen", *map(str, args)]
    return subprocess.run(
        cmd,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def chasing(obs):  # noqa: ANN001, ANN201 - a fixed policy: each row's action from its observation
    """Actions that depend on the observations (so that episodes differ), for one group or several."""
    if isinstance(obs, tuple):
        return tuple(chasing(o) for o in obs)
    return (np.abs(obs[:, 2] * 10).astype(np.int64) + np.arange(len(obs))) % 5


def test_episode_figures_are_the_training_episodes(tmp_path):
    """Evaluation's return, team return and group returns are those the training env reports
    (drain_episodes, drain_team_episodes, drain_group_returns) for the same copies and actions."""
    seed, rank = 5, 3
    got = evaluate_agents(chasing, TAG, 3, seed, rank)
    assert got.returns.shape == (3,) and got.lengths.tolist() == [25, 25, 25]
    env = ParallelVectorEnv(TAG["pettingzoo"], 3, seed=seed, rank=rank, kwargs=TAG["kwargs"], groups=TAG_GROUPS)
    obs = env.reset()
    for _ in range(25):
        out = env.step(*chasing(obs))
        obs = (out[0], out[4])
    mean = [r for r, _ in env.drain_episodes()]
    team = [r for r, _ in env.drain_team_episodes()]
    groups = env.drain_group_returns()
    env.close()
    np.testing.assert_allclose(got.returns, mean, rtol=1e-6)
    np.testing.assert_allclose(got.team, team, rtol=1e-6)
    assert set(got.groups) == {"adversaries", "good"}
    for g in got.groups:
        np.testing.assert_allclose(got.groups[g], groups[g], rtol=1e-6)
    assert np.std(got.team) > 0  # the copies' episodes differ


def test_each_copy_counts_its_first_episode_only():
    """More episodes than copies: the envs reset and play again; the same seed, the same returns."""
    a = evaluate_agents(chasing, SPREAD, 20, 1, 9)  # 16 copies, then 16 more of which 4 count
    b = evaluate_agents(chasing, SPREAD, 20, 1, 9)
    assert a.returns.shape == (20,) and np.isfinite(a.returns).all() and (a.lengths == 25).all()
    np.testing.assert_array_equal(a.returns, b.returns)
    assert not a.groups  # one group: no per-group figures


def test_in_graph_evaluation_is_seeded_and_whole():
    import tensorflow as tf

    act = tf.function(lambda obs: tf.cast(tf.abs(obs[:, 2] * 10), tf.int32) % 5, autograph=False)
    run = in_graph_agents(act, {**SPREAD, "backend": "tensorflow"}, 6, seed=4)
    first, second = run().numpy(), run().numpy()
    assert first.shape == (6,) and np.isfinite(first).all() and (first < 0).all()  # distances cost every step
    np.testing.assert_array_equal(first, second)


def small_spec(example: str, tmp_path: Path, env: dict | None = None, **train) -> Path:
    data = yaml.safe_load((EXAMPLES / f"{example}.rl.yaml").read_text())
    data["env"].update(num_envs=4, **(env or {}))
    for comp in data["components"].values():
        if comp["kind"] == "mappo":
            comp["epochs"] = 1
    data["train"].pop("checkpoint", None)
    data["train"].update(train)
    path = tmp_path / f"{example}.rl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def train(spec: Path, run_dir: Path, *args, env: dict | None = None) -> list[dict]:
    """Two iterations of ``spec`` into ``run_dir``; its metrics rows that carry an evaluation."""
    r = rlgen("run", spec, "--iterations", 2, "--run-dir", run_dir, "--quiet", *args, cwd=run_dir.parent, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [row for row in rows if "eval_mean_return" in row]


def eval_json(run_dir: Path, *args) -> dict:
    r = rlgen("eval", run_dir, "--json", *args, cwd=run_dir.parent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout)


def test_validate_accepts_train_eval_for_agents_under_single_and_agent_groups(tmp_path):
    spec = small_spec("mappo-simple-tag", tmp_path, eval={"every": 1000, "episodes": 4})
    ok = rlgen("validate", spec, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    groups = rlgen("validate", spec, "--policy", "agent-groups", "--workers", 3, cwd=tmp_path)
    assert groups.returncode == 0, groups.stdout + groups.stderr  # no longer E425


def test_several_groups_train_with_eval_and_rlgen_eval_reports_each_group(tmp_path):
    """simple_tag's two groups: evaluation rows carry each group's return (the spawned evaluator
    process restores the exported template of both groups' policies), and rlgen eval reports the
    return, the team return and the groups, the same for the same seed, and records videos."""
    spec = small_spec("mappo-simple-tag", tmp_path, eval={"every": 100, "episodes": 3})
    run_dir = tmp_path / "run"
    evaluated = train(spec, run_dir, env={"RLGEN_EVAL_PROCESS": "spawn"})
    assert json.loads((run_dir / "run.json").read_text())["eval_process"] == "spawned"
    assert evaluated, "no evaluation row"
    for row in evaluated:
        assert math.isfinite(row["eval_mean_return"])
        groups = [row["adversaries/eval_return"], row["good/eval_return"]]  # the mean over all 4 agents:
        assert row["eval_mean_return"] == pytest.approx((3 * groups[0] + groups[1]) / 4, abs=1e-4)
    out = eval_json(run_dir, "--episodes", 5, "--seed", 7)
    assert out["episodes"] == 5 and out["agents"] == 4 and math.isfinite(out["mean_return"])
    assert out["team_mean_return"] == pytest.approx(4 * out["mean_return"])
    assert set(out["groups"]) == {"adversaries", "good"}
    adv, good = out["groups"]["adversaries"]["mean_return"], out["groups"]["good"]["mean_return"]
    assert out["mean_return"] == pytest.approx((3 * adv + good) / 4)
    assert eval_json(run_dir, "--episodes", 5, "--seed", 7) == out  # deterministic: reproducible
    best = eval_json(run_dir, "--episodes", 2, "--best")
    assert best["policy"] == "policy-best" and best["episodes"] == 2
    videos = tmp_path / "videos"
    text = rlgen("eval", run_dir, "--episodes", 2, "--video", videos, cwd=tmp_path)
    assert text.returncode == 0, text.stderr[-3000:]
    assert "team return" in text.stdout and "adversaries: return" in text.stdout
    assert sorted(p.name for p in videos.iterdir()) == ["policy-episode-0.mp4", "policy-episode-1.mp4"]
    assert all(p.stat().st_size > 1000 for p in videos.iterdir())


def test_per_agent_networks_in_graph_sampled_eval_in_the_loop(tmp_path):
    """simple_spread in the graph with one network per agent and sampled evaluation actions
    (evaluated in the loop, in the graph); rlgen eval steps the in-graph env too."""
    spec = small_spec(
        "mappo-simple-spread",
        tmp_path,
        env={"backend": "tensorflow", "agents": {"share": False}},
        eval={"every": 100, "episodes": 4, "deterministic": False},
    )
    run_dir = tmp_path / "run"
    evaluated = train(spec, run_dir, "--set", "components.learner.minibatch=60")
    assert "eval_process" not in json.loads((run_dir / "run.json").read_text())  # sampled: in the loop
    assert evaluated
    assert all(math.isfinite(row["eval_mean_return"]) and row["eval_mean_return"] < 0 for row in evaluated)
    out = eval_json(run_dir, "--episodes", 6)
    assert out["episodes"] == 6 and out["agents"] == 3 and "groups" not in out
    assert out["team_mean_return"] == pytest.approx(3 * out["mean_return"])
    assert eval_json(run_dir, "--episodes", 6) == out
