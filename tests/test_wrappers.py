"""Gymnasium wrappers named in the spec (`env.wrappers`): validated, built into the plan, and
applied to the envs that train, the ones that evaluate and the exported policy's inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlgen.dsl.wrappers import Wrapper, parse, problem

from conftest import ROOT

HOROVOD = Path(sys.executable).with_name("horovodrun").exists()
EXAMPLE = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
STACKED = "  wrappers:\n    - TimeAwareObservation\n    - FrameStackObservation: {stack_size: 2}\n"


def wrapped_spec(tmp_path: Path, wrappers: str = STACKED, extra_env: str = "") -> Path:
    text = EXAMPLE.replace("  id: CartPole-v1\n", "  id: CartPole-v1\n" + wrappers + extra_env, 1)
    assert text != EXAMPLE
    path = tmp_path / "wrapped.rl.yaml"
    path.write_text(text)
    return path


def rlgen(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rlgen", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_entries_are_names_or_one_key_mappings():
    assert parse(["TimeAwareObservation", {"FrameStackObservation": {"stack_size": 4}}, {"a.b:C": None}]) == (
        Wrapper("TimeAwareObservation"),
        Wrapper("FrameStackObservation", {"stack_size": 4}),
        Wrapper("a.b:C"),
    )
    assert Wrapper("a.b:C").custom and not Wrapper("ClipAction").custom


def test_a_problem_names_the_fix():
    assert problem(Wrapper("FrameStackObservation", {"stack_size": 4})) is None
    assert problem(Wrapper("my_pkg.wrappers:Anything", {"x": 1})) is None  # imported by `rlgen run` only
    what, hint = problem(Wrapper("FrameStack"))
    assert "FrameStackObservation" in what and "gymnasium.wrappers" in hint
    what, hint = problem(Wrapper("TimeLimit", {"max_episode_steps": 10}))
    assert "max_episode_steps" in hint
    what, hint = problem(Wrapper("FrameStackObservation"))
    assert "stack_size" in what and "stack_size, padding_type" in hint
    what, hint = problem(Wrapper("TransformReward", {"func": "abs"}))
    assert '"pkg.module:Class"' in hint


def test_the_plan_sees_the_wrapped_spaces_and_the_resolved_spec_keeps_the_wrappers(tmp_path):
    from rlgen.api import validate_file
    from rlgen.codegen.build import build

    result = validate_file(wrapped_spec(tmp_path))
    assert result.ok, result.diagnostics
    done = build(result)
    plan = json.loads(done.files["plan.json"])
    assert plan["run"]["env"]["obs_shape"] == [2, 5]  # two stacked frames of 4 features and the time
    env = next(f for f in plan["fragments"] if f["kind"] == "env")["env"]
    assert env["wrappers"] == [
        {"name": "TimeAwareObservation", "kwargs": {}},
        {"name": "FrameStackObservation", "kwargs": {"stack_size": 2}},
    ]
    resolved = json.loads(done.files["spec.resolved.json"])
    assert resolved["env"]["wrappers"] == ["TimeAwareObservation", {"FrameStackObservation": {"stack_size": 2}}]
    again = tmp_path / "resolved.rl.yaml"
    again.write_text(json.dumps({k: v for k, v in resolved.items() if k != "overrides"}))
    assert validate_file(again).ok


def test_a_custom_wrapper_validates_once_the_spaces_are_declared(tmp_path):
    from rlgen.api import validate_file

    custom = '  wrappers: ["my_pkg.wrappers:AddFeature"]\n'
    spaces = "  spaces: {observation: {shape: [5]}, action: {n: 2}}\n"
    assert [d.code for d in validate_file(wrapped_spec(tmp_path, custom)).diagnostics] == ["E405"]
    assert validate_file(wrapped_spec(tmp_path, custom, spaces)).ok


def test_training_evaluation_and_the_exported_policy_see_the_wrapped_env(tmp_path):
    run_dir = tmp_path / "run"
    r = rlgen(
        "run", wrapped_spec(tmp_path), "--iterations", 3, "--set", "train.eval.every=512", "--run-dir", run_dir,
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["final_eval"]["mean_return"] > 0  # the final policy, evaluated on the wrapped env
    import tensorflow as tf

    policy = tf.saved_model.load(str(run_dir / "policy"))
    actions = policy.act(tf.constant(np.zeros((3, 2, 5), np.float32))).numpy()
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1}
    r = rlgen("eval", run_dir, "--episodes", 2, cwd=tmp_path)
    assert r.returncode == 0 and "2 episodes" in r.stdout, r.stderr[-2000:]


CUSTOM = '''
import gymnasium as gym
import numpy as np


class AddFeature(gym.ObservationWrapper):
    """Appends a constant feature: the network's input has 5 features only if it applied."""

    def __init__(self, env, value=1.0):
        super().__init__(env)
        low = np.append(env.observation_space.low, value).astype(np.float32)
        high = np.append(env.observation_space.high, value).astype(np.float32)
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.value = value

    def observation(self, obs):
        return np.append(obs, self.value).astype(np.float32)
'''


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_actors_apply_a_custom_wrapper_from_the_users_module(tmp_path):
    (tmp_path / "mywrappers.py").write_text(CUSTOM)
    custom = '  wrappers: [{"mywrappers:AddFeature": {value: 0.5}}]\n'
    spaces = "  spaces: {observation: {shape: [5]}, action: {n: 2}}\n"
    run_dir = tmp_path / "run"
    r = rlgen(
        "run", wrapped_spec(tmp_path, custom, spaces), "--policy", "actors-learner", "--workers", 2,
        "--iterations", 3, "--run-dir", run_dir, "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_steps"] == 3 * 256 and rows[-1]["policy_loss"] is not None
