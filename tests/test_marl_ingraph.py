"""`env: {pettingzoo: mpe2.simple_spread_v3, backend: tensorflow}`: validated (E428 for kwargs the
in-graph env does not take), built (one fused graph under `single` that makes the TF env; host
steps of it in env workers), stepped with and without the global state, and trained under `single`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.api import build_file, validate_text

pytest.importorskip("mpe2.simple_spread_v3")

SPEC = """\
rlgen: 1
name: ippo-spread-tf
env:
  pettingzoo: mpe2.simple_spread_v3
  backend: tensorflow
  kwargs: {N: 3, local_ratio: 0.5, max_cycles: 25, continuous_actions: false}
  num_envs: 8
networks:
  pi: {kind: mlp, hidden: [64, 64]}
  v: {kind: mlp, hidden: [64, 64]}
components:
  actor: {kind: policy, network: pi}
  critic: {kind: value, network: v}
  buffer: {kind: rollout}
  learner: {kind: ppo, policy: actor, value: critic, minibatch: 600, epochs: 4}
loop:
  init:
    - env.reset() -> obs
  rollout:
    repeat: 25
    do:
      - actor.act(obs) -> action, logp
      - critic.value(obs) -> value
      - env.step(action) -> next_obs, reward, terminated, truncated
      - buffer.insert(obs, action, reward, terminated, truncated, logp, value)
    carry: {obs: next_obs}
  learn:
    - learner.update(buffer, obs) -> metrics
partitions:
  env: {at: env.step, send: [action], receive: [next_obs, reward, terminated, truncated]}
  rollout: {after: rollout, send: [buffer, obs], receive: [weights]}
  gradients: {at: learner.update, reduce: [gradients]}
train:
  total_steps: 20000
  seed: 0
"""
KWARGS = "kwargs: {N: 3, local_ratio: 0.5, max_cycles: 25, continuous_actions: false}"


def errors(text: str) -> list[tuple[str, str]]:
    return [(d.code, d.path) for d in validate_text(text).diagnostics if d.severity == "error"]


def with_kwargs(kwargs: str, backend: bool = True) -> str:
    text = SPEC.replace(KWARGS, f"kwargs: {kwargs}")
    return text if backend else text.replace("  backend: tensorflow\n", "")


def test_validates_and_refuses_kwargs_the_in_graph_env_does_not_take():
    assert errors(SPEC) == []
    assert errors(with_kwargs("{N: 3, reward: reference}")) == []
    assert errors(with_kwargs("{N: 3, render_mode: human}")) == [("E428", ("env", "kwargs", "render_mode"))]
    assert errors(with_kwargs("{reward: shared}")) == [("E428", ("env", "kwargs", "reward"))]
    assert errors(with_kwargs("{continuous_actions: true}")) == [("E428", ("env", "kwargs", "continuous_actions"))]
    assert errors(with_kwargs("{local_ratio: 2}")) == [("E428", ("env", "kwargs", "local_ratio"))]
    # rlgen's own `reward` only with the in-graph env: mpe2 would not take it
    assert errors(with_kwargs("{N: 3, reward: reference}", backend=False)) == [("E428", ("env", "kwargs", "reward"))]


def test_in_graph_pettingzoo_envs_are_only_those_rlgen_has():
    got = errors(SPEC.replace("mpe2.simple_spread_v3", "mpe2.simple_tag_v3"))
    assert ("E423", ("env", "backend")) in got


def test_builds_make_the_tf_env(tmp_path):
    spec = tmp_path / "spread.rl.yaml"
    spec.write_text(SPEC.replace(KWARGS, "kwargs: {N: 3, reward: reference}"))
    result, single = build_file(spec, tmp_path / "single", policy="single")
    assert single is not None, result.diagnostics
    package = tmp_path / "single" / "ippo_spread_tf"
    assert not list(package.glob("env*.py"))  # one fused graph: no env fragment
    agent = (package / "agent.py").read_text()
    assert "make_tf_agent_env(" in agent and "BATCH // AGENTS" in agent and "tf.while_loop(" in agent
    assert '"reward": "reference"' in agent and "AGENTS = 3" in agent
    result, al = build_file(spec, tmp_path / "al", policy="actors-learner", workers=2)
    assert al is not None, result.diagnostics
    env_module = next((tmp_path / "al" / "ippo_spread_tf").glob("*env*.py")).read_text()
    assert "HostTFAgentEnv(" in env_module and "ParallelVectorEnv" not in env_module


def test_agent_env_returns_the_state_when_asked():
    tf = pytest.importorskip("tensorflow")
    from rlgen.runtime.mpe.agent_env import make_tf_agent_env
    from rlgen.runtime.tfenvs.host import HostTFAgentEnv

    env = make_tf_agent_env("mpe2.simple_spread_v3", 4, kwargs={"N": 3, "continuous_actions": False}, state="concat")
    obs, state = env.reset()
    assert obs.shape == (12, 18) and state.shape == (12, 54)
    out = env.step(tf.zeros([12], tf.int32))
    assert len(out) == 5 and out[4].shape == (12, 54)
    assert bool(tf.reduce_all(out[4][:3] == tf.reshape(out[0][:3], [1, 54])))  # env 0's obs, on its 3 rows
    plain = make_tf_agent_env("mpe2.simple_spread_v3", 2, kwargs={"max_cycles": 3})
    assert plain.reset().shape == (6, 18) and len(plain.step(tf.zeros([6], tf.int32))) == 4
    host = HostTFAgentEnv("mpe2.simple_spread_v3", 2, seed=1, kwargs={"max_cycles": 2}, state="env")
    obs, state = host.reset()
    for _ in range(3):
        obs, reward, terminated, truncated, state = host.step(obs[:, 0] * 0)
    assert reward.shape == (6,) and state.shape == (6, 54) and len(host.drain_episodes()) == 2


@pytest.mark.skipif(not Path(sys.executable).with_name("horovodrun").exists(), reason="needs scripts/setup.sh")
def test_trains_under_single(tmp_path):
    spec = tmp_path / "spread.rl.yaml"
    spec.write_text(SPEC)
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", "single"]
    cmd += ["--run-dir", str(run_dir), "--iterations", "3", "--quiet"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [row for row in rows if "mean_return" in row]
    assert len(rows) == 3 and rows[-1]["episodes"] > 0
    assert all(math.isfinite(row["mean_return"]) for row in rows if row["episodes"])
    assert -80 < rows[-1]["mean_return"] < 0  # simple_spread's rewards are negative distances
