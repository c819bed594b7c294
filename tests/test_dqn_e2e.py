"""DQN from a spec, end to end: generated code, real gymnasium, real Horovod ranks.

The replay buffer lives with the learner. Under `actors-learner` the actor ranks send
each collection block's steps to it; under `central-inference` the learner rank acts
for every env itself. Both must hand the learner the same transitions: with greedy
acting (each replica explores with its own random stream, so exploration would differ),
actors that wait for every update (lag 0) and the same seed they train identically.
`multi-learner` keeps one replay per learner.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

DQN = (ROOT / "examples" / "dqn-cartpole.rl.yaml").read_text()
HOROVOD = Path(sys.executable).with_name("horovodrun").exists()


def spec(
    tmp_path: Path, num_envs: int = 2, learning_starts: int = 512, eval_every: int = 0, greedy: bool = False
) -> Path:
    text = DQN.replace("  num_envs: 1 ", f"  num_envs: {num_envs} ", 1)
    if greedy:
        text = re.sub(r"initial: 1.0 ", "initial: 0.0 ", text)
        text = re.sub(r"final: 0.04 ", "final: 0.0 ", text)
        text = text.replace("  policy: single", "  policy: single\n  lag: 0")  # actors act on the newest weights
    text = re.sub(r"after: 1000 ", f"after: {learning_starts} ", text)
    # greedy: no random steps either (each replica would draw its own random actions)
    text = re.sub(r"random_steps: 1000 ", f"random_steps: {0 if greedy else learning_starts} ", text)
    text = re.sub(r"eval: \{every: \d+, episodes: \d+", f"eval: {{every: {eval_every}, episodes: 3", text)
    assert text.count(f"after: {learning_starts} ") == 2
    path = tmp_path / "dqn.rl.yaml"
    path.write_text(text)
    return path


def run(
    tmp_path: Path, policy: str, workers: int, iterations: int, eval_every: int = 0, greedy: bool = False
) -> list[dict]:
    run_dir = tmp_path / f"run-{policy}"
    path = spec(tmp_path, eval_every=eval_every, greedy=greedy)
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(path), "--policy", policy, "--workers", str(workers)]
        + ["--run-dir", str(run_dir), "--build-dir", str(tmp_path / f"build-{policy}")]
        + ["--iterations", str(iterations), "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_single_learns_from_replay_after_learning_starts(tmp_path):
    rows = run(tmp_path, "single", 1, 6, eval_every=1024)
    # blocks with `after: 512` start in the iteration that begins with 512 steps taken
    assert [r.get("loss") is not None for r in rows] == [False, True, True, True, True, True]
    assert rows[-1]["env_steps"] == 6 * 512
    assert rows[-1]["q"] > rows[1]["q"] > 0  # Q-values grow towards the discounted returns
    run_dir = tmp_path / "run-single"
    assert (run_dir / "policy" / "saved_model.pb").exists()
    # the best periodic evaluation is kept, with its policy
    evals = [(r["eval_mean_return"], r["eval_env_steps"]) for r in rows if "eval_mean_return" in r]
    assert len(evals) == 3
    best = max(evals, key=lambda e: e[0])  # the first of equals: only a better one replaces it
    best = next(e for e in evals if e[0] == best[0])
    doc = json.loads((run_dir / "run.json").read_text())
    assert (doc["best_eval"]["mean_return"], doc["best_eval"]["env_steps"]) == best
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "eval", str(run_dir), "--best", "--episodes", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["episodes"] == 3


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_actors_send_the_learner_the_transitions_it_would_collect_itself(tmp_path):
    actors = run(tmp_path, "actors-learner", 2, 5, greedy=True)
    central = run(tmp_path, "central-inference", 2, 5, greedy=True)
    keys = ("env_steps", "episodes", "mean_return", "loss", "q", "grad_norm")
    assert [[r.get(k) for k in keys] for r in actors] == [[r.get(k) for k in keys] for r in central]
    assert actors[-1]["loss"] is not None


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_multi_learner_trains_one_replay_per_rank(tmp_path):
    rows = run(tmp_path, "multi-learner", 2, 4)
    assert rows[-1]["loss"] is not None and rows[-1]["env_steps"] == 4 * 512


def test_random_steps_act_uniformly_before_learning_whatever_epsilon_says(tmp_path, monkeypatch):
    """SB3's DQN acts uniformly at random before learning_starts; ``random_steps`` does the
    same, in the generated acting step. With ε 0 throughout (greedy), the actions for one
    observation are uniform before ``random_steps`` env steps and all the greedy one after."""
    import importlib

    import numpy as np
    from buildcases import build_importable

    path = spec(tmp_path, num_envs=1, learning_starts=1000)
    text = path.read_text().replace("initial: 1.0 ", "initial: 0.0 ").replace("final: 0.04 ", "final: 0.0 ")
    total = int(re.search(r"total_steps: (\d+)", text).group(1))
    path.write_text(text)
    unique, _ = build_importable(path, "single", 1, tmp_path / "build", "rlgen_random_steps_dqn", monkeypatch)
    agent = importlib.import_module(f"{unique}.agent").AgentFragment(seed=3)
    obs = np.full((1, 4), 0.02, np.float32)

    def actions(steps: int) -> np.ndarray:
        progress = np.float32(steps / total)
        return np.array([np.asarray(agent.collect_q_act(obs, progress)).reshape(-1)[0] for _ in range(400)])

    before, after = actions(500), actions(1500)
    assert 0.4 < before.mean() < 0.6  # two actions, uniform: 400 draws, sd 0.025
    assert len(set(after)) == 1  # greedy: one action, always
