"""Evaluation of an in-graph env (``backend: tensorflow``) in the graph: every episode at
once, policy and env in one compiled loop (rlgen.runtime.evaluation.episodes.PolicyEvaluation).
Its returns are those of stepping the same seeded envs one step at a time, they depend
on the policy's weights alone, and the generated run hands the backend to it."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from rlgen.runtime.envs import env_seed  # noqa: E402
from rlgen.runtime.evaluation.episodes import EVAL_RANK, PolicyEvaluation  # noqa: E402
from rlgen.runtime.tfenvs import make_tf_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _first_episode_returns(act, env_id: str, episodes: int, seed: int) -> np.ndarray:  # noqa: ANN001
    """The reference: the same envs stepped eagerly, each env's first episode summed in Python."""
    env = make_tf_env(env_id, episodes, seed=env_seed(seed, EVAL_RANK))
    obs = env.reset()
    running, returns = np.zeros(episodes), np.full(episodes, np.nan)
    while np.isnan(returns).any():
        obs, reward, terminated, truncated = env.step(act(obs))
        running += np.where(np.isnan(returns), reward.numpy(), 0.0)
        ended = (terminated.numpy() | truncated.numpy()) & np.isnan(returns)
        returns[ended] = running[ended]
    return returns


class Linear(tf.Module):
    """A small deterministic policy whose actions depend on its weights."""

    def __init__(self, obs_size: int, discrete: bool) -> None:
        super().__init__()
        self.w = tf.Variable(tf.random.stateless_normal([obs_size, 1], seed=[1, 2]))
        self.discrete = discrete

    @tf.function(autograph=False)
    def act(self, obs: tf.Tensor) -> tf.Tensor:
        score = tf.matmul(obs, self.w)
        if self.discrete:
            return tf.cast(score[:, 0] > 0, tf.int64)
        return tf.clip_by_value(score, -2.0, 2.0)


@pytest.mark.parametrize("env_id,obs_size,discrete", [("CartPole-v1", 4, True), ("Pendulum-v1", 3, False)])
def test_in_graph_returns_are_those_of_stepping_the_envs(env_id: str, obs_size: int, discrete: bool) -> None:
    policy = Linear(obs_size, discrete)
    evaluation = PolicyEvaluation(policy.act, {"id": env_id, "backend": "tensorflow"}, 6, 11)
    got = evaluation()
    want = _first_episode_returns(policy.act, env_id, 6, 11)
    assert got.shape == (6,)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_each_evaluation_starts_from_the_same_states_and_depends_on_the_weights() -> None:
    policy = Linear(4, True)
    evaluation = PolicyEvaluation(policy.act, {"id": "CartPole-v1", "backend": "tensorflow"}, 8, 0)
    evaluation.prepare()
    first, again = evaluation(), evaluation()
    np.testing.assert_array_equal(first, again)
    policy.w.assign(-policy.w)
    changed = evaluation()
    assert not np.array_equal(first, changed)
    np.testing.assert_array_equal(changed, _first_episode_returns(policy.act, "CartPole-v1", 8, 0))


def test_the_generated_run_names_the_in_graph_backend_to_its_evaluation() -> None:
    import json

    from rlgen.api import validate_file
    from rlgen.codegen.build import render_build

    def run_env(example: str) -> dict:
        path = str(ROOT / "examples" / example)
        return json.loads(render_build(validate_file(path), path).files["plan.json"])["run"]["env"]

    assert run_env("ppo-cartpole-ingraph.rl.yaml")["backend"] == "tensorflow"
    assert "backend" not in run_env("ppo-cartpole.rl.yaml")  # evaluated on gymnasium's envs, as trained
