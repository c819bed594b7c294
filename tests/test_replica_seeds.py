"""Every replica draws its own random stream, derived from the run seed and its rank (issue: all
actors sampled with the same seed). Checked on generated actor fragments, as ranks build them."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")


from buildcases import build_importable  # noqa: E402

from conftest import ROOT  # noqa: E402


def _actor_class(example: str, tmp_path, monkeypatch):
    unique = f"rlgen_seeds_{example.removesuffix('.rl.yaml').replace('-', '_')}"
    build_importable(ROOT / "examples" / example, "actors-learner", 2, tmp_path / "build", unique, monkeypatch)
    return importlib.import_module(f"{unique}.actor").ActorFragment


def _actions(actor, step: str, obs: np.ndarray, *extra) -> np.ndarray:
    return np.stack([np.asarray(getattr(actor, step)(obs, *extra)[0]) for _ in range(20)])


@pytest.mark.parametrize(
    ("example", "envs", "step", "extra"),
    [
        ("ppo-cartpole.rl.yaml", 8, "rollout_actor_act_critic_value", ()),
        ("dqn-cartpole.rl.yaml", 1, "collect_q_act", (np.float32(0.0),)),  # progress 0: epsilon 1, all random
    ],
)
def test_two_actors_draw_different_streams_and_a_rerun_draws_the_same(
    example, envs, step, extra, tmp_path, monkeypatch
):
    actor_cls = _actor_class(example, tmp_path, monkeypatch)
    obs = np.random.default_rng(0).normal(size=(envs, 4)).astype(np.float32) * 0.05
    first, second, first_again = actor_cls(1, 0), actor_cls(2, 0), actor_cls(1, 0)
    a1, a2 = _actions(first, step, obs, *extra), _actions(second, step, obs, *extra)
    assert not np.array_equal(a1, a2)
    np.testing.assert_array_equal(_actions(first_again, step, obs, *extra), a1)
    # the networks themselves are equal on every replica (rank 0's weights are broadcast anyway)
    for v1, v2 in zip(first.weights(), second.weights(), strict=True):
        np.testing.assert_array_equal(v1.numpy(), v2.numpy())
