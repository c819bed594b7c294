"""Tests of the continuous-control pieces: actors, twin critics, the SAC and TD3 learners, their configs."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from rlgen.algorithms.base import from_settings  # noqa: E402
from rlgen.algorithms.sac.config import SACConfig  # noqa: E402
from rlgen.algorithms.sac.learner import METRICS as SAC_METRICS  # noqa: E402
from rlgen.algorithms.sac.learner import SACLearner  # noqa: E402
from rlgen.algorithms.td3.config import TD3Config  # noqa: E402
from rlgen.algorithms.td3.learner import METRICS as TD3_METRICS  # noqa: E402
from rlgen.algorithms.td3.learner import TD3Learner  # noqa: E402
from rlgen.runtime.continuous import (  # noqa: E402
    DeterministicActor,
    QCritic,
    SquashedGaussianActor,
    make_compiled_actor,
    polyak,
    scale_action,
    unscale_action,
)
from rlgen.runtime.networks import build_network  # noqa: E402
from rlgen.runtime.policies import ActionSpec  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

configure_threads(1, 1)

OBS = (3,)
SPEC = ActionSpec(shape=(2,), low=(-2.0, 0.0), high=(2.0, 1.0))
NET = {"kind": "mlp", "hidden": [16, 16], "activation": "relu"}


def _critic(action_dim: int = 2, seed: int = 1) -> QCritic:
    return QCritic([build_network(NET, (OBS[0] + action_dim,), 1, seed=seed + i) for i in range(2)])


def _sac(**config: object) -> SACLearner:
    actor = SquashedGaussianActor(build_network(NET, OBS, 4, seed=0), SPEC, seed=0)
    return SACLearner(actor, _critic(), SACConfig(jit_compile=False, **config), OBS)


def _td3(**config: object) -> TD3Learner:
    actor = DeterministicActor(build_network(NET, OBS, 2, seed=0), SPEC, seed=0)
    return TD3Learner(actor, _critic(), TD3Config(jit_compile=False, **config), OBS)


def _batch(k: int, b: int = 32, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(k, b, *OBS)).astype(np.float32),
        rng.uniform(SPEC.low, SPEC.high, size=(k, b, 2)).astype(np.float32),
        rng.normal(size=(k, b)).astype(np.float32),
        rng.normal(size=(k, b, *OBS)).astype(np.float32),
        (rng.random((k, b)) < 0.1).astype(np.float32),
    )


def _values(variables: list[tf.Variable]) -> list[np.ndarray]:
    return [v.numpy().copy() for v in variables]


def _changed(now: list[np.ndarray], before: list[np.ndarray]) -> bool:
    return any(not np.array_equal(a, b) for a, b in zip(now, before, strict=True))


# --- components ----------------------------------------------------------------------


def test_scale_and_unscale_are_inverse_and_map_the_bounds() -> None:
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    np.testing.assert_allclose(scale_action(np.stack([low, high]), low, high).numpy(), [[-1, -1], [1, 1]])
    a = np.array([[0.5, 0.25]], np.float32)
    np.testing.assert_allclose(unscale_action(scale_action(a, low, high), low, high).numpy(), a, rtol=1e-6)


def test_squashed_gaussian_log_prob_matches_the_density() -> None:
    """One action dimension: ``log_prob`` is the log of ``N(atanh a; mean, std) / (1 - a^2)``, the
    density integrates to 1 over (-1, 1), and ``sample`` reports the log-density of what it drew."""
    spec = ActionSpec(shape=(1,), low=(-1.0,), high=(1.0,))
    actor = SquashedGaussianActor(build_network(NET, OBS, 2, seed=3), spec, seed=5)
    actor.network.head.b.assign([0.4, -0.3])  # mean offset 0.4, std about exp(-0.3)
    obs = np.random.default_rng(1).normal(size=(4, *OBS)).astype(np.float32)
    mean, log_std = (x.numpy()[:, 0].astype(np.float64) for x in actor.gaussian(obs))
    grid = np.linspace(-1 + 1e-4, 1 - 1e-4, 20001)
    for i in range(len(obs)):
        o = np.repeat(obs[i : i + 1], len(grid), axis=0)
        logp = actor.log_prob(o, grid[:, None].astype(np.float32)).numpy().astype(np.float64)
        u = np.arctanh(grid)
        std = np.exp(log_std[i])
        expect = -0.5 * ((u - mean[i]) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi) - np.log(1 - grid**2)
        inner = np.abs(grid) < 0.99
        np.testing.assert_allclose(logp[inner], expect[inner], rtol=1e-4, atol=1e-4)
        assert np.trapezoid(np.exp(logp), grid) == pytest.approx(1.0, abs=2e-3)
    a, logp = actor.sample(obs)
    np.testing.assert_allclose(logp.numpy(), actor.log_prob(obs, a.numpy()).numpy(), rtol=1e-3, atol=1e-3)


def test_tanh_correction_is_finite_for_saturated_actions() -> None:
    spec = ActionSpec(shape=(1,), low=(-1.0,), high=(1.0,))
    actor = SquashedGaussianActor(build_network(NET, OBS, 2, seed=3), spec, seed=5)
    actor.network.head.b.assign([30.0, 2.0])  # tanh(u) rounds to 1 in float32
    a, logp = actor.sample(np.zeros((64, *OBS), np.float32))
    assert np.all(np.isfinite(logp.numpy())) and np.all(np.abs(a.numpy()) <= 1.0)


def test_actions_stay_within_bounds() -> None:
    obs = np.random.default_rng(0).normal(size=(256, *OBS)).astype(np.float32) * 10
    low, high = np.array(SPEC.low), np.array(SPEC.high)
    sac = SquashedGaussianActor(build_network(NET, OBS, 4, seed=0), SPEC, seed=0)
    sac.network.head.b.assign([3.0, -3.0, 2.0, 2.0])  # means far outside, wide noise
    td3 = DeterministicActor(build_network(NET, OBS, 2, seed=0), SPEC, seed=0, noise_std=2.0)
    td3.network.head.b.assign([3.0, -3.0])
    for actor in (sac, td3):
        compiled = make_compiled_actor(actor, OBS, jit_compile=False)
        for act in (compiled(obs), compiled.deterministic(obs), compiled.random(256)):
            assert act.shape == (256, 2) and act.dtype == np.float32
            assert np.all(act >= low) and np.all(act <= high)
        r = compiled.random(4096)
        assert r.min(axis=0) == pytest.approx(low, abs=0.01) and r.max(axis=0) == pytest.approx(high, abs=0.01)


def test_critic_has_one_value_per_head_and_rejects_shared_networks() -> None:
    critic = _critic()
    q = critic.values(np.zeros((5, *OBS), np.float32), np.zeros((5, 2), np.float32))
    assert q.shape == (2, 5)
    net = build_network(NET, (5,), 1, seed=0)
    with pytest.raises(ValueError, match="share"):
        QCritic([net, net])


def test_actor_exports_in_a_saved_model(tmp_path: Path) -> None:
    actor = SquashedGaussianActor(build_network(NET, OBS, 4, seed=0), SPEC, seed=0)
    module = tf.Module()
    module.actor = actor
    module.act = tf.function(
        lambda obs: actor.act(obs, deterministic=True)[0], input_signature=[tf.TensorSpec([None, *OBS], tf.float32)]
    )
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    obs = np.ones((2, *OBS), np.float32)
    np.testing.assert_allclose(loaded.act(obs).numpy(), actor.act(obs, deterministic=True)[0].numpy(), rtol=1e-6)
    assert all(isinstance(v, tf.Variable) for v in actor.trainable_variables)


# --- learners ------------------------------------------------------------------------


def test_polyak_moves_targets_by_tau() -> None:
    target, online = tf.Variable([0.0, 1.0]), tf.Variable([1.0, 3.0])
    polyak([target], [online], 0.25)
    np.testing.assert_allclose(target.numpy(), [0.25, 1.5])


def test_sac_update_moves_target_critics_by_tau() -> None:
    learner = _sac(tau=0.1)
    before = _values(learner.target.trainable_variables)
    metrics = learner.update(_batch(1))
    assert tuple(metrics) == SAC_METRICS
    online = _values(learner.critic.trainable_variables)
    for t, b, o in zip(_values(learner.target.trainable_variables), before, online, strict=True):
        np.testing.assert_allclose(t, 0.9 * b + 0.1 * o, rtol=1e-5, atol=1e-6)
    assert int(learner.steps.numpy()) == 1


def test_sac_target_update_interval_counts_gradient_steps_across_calls() -> None:
    learner = _sac(target_update_interval=2)
    batch = _batch(1)
    learner.update(batch)  # step 0: updates the targets
    before = _values(learner.target.trainable_variables)
    learner.update(batch)  # step 1: does not
    for t, b in zip(_values(learner.target.trainable_variables), before, strict=True):
        np.testing.assert_array_equal(t, b)
    learner.update(batch)  # step 2: does
    assert _changed(_values(learner.target.trainable_variables), before)


def test_sac_entropy_coefficient_auto_and_fixed() -> None:
    auto = _sac()
    assert auto.ent_coef == pytest.approx(1.0) and auto.target_entropy == -2.0
    first = auto.update(_batch(3))
    assert first["ent_coef"] == pytest.approx(1.0, abs=3e-3)  # alpha read before each step's update
    assert auto.ent_coef != pytest.approx(1.0, abs=1e-5)
    fixed = _sac(ent_coef=0.2, target_entropy=-1.0)
    metrics = fixed.update(_batch(3))
    assert metrics["ent_coef"] == pytest.approx(0.2) and metrics["ent_coef_loss"] == 0.0
    assert fixed.ent_coef == pytest.approx(0.2)
    assert SACConfig(ent_coef="auto_0.1").initial_ent_coef() == pytest.approx(0.1)
    with pytest.raises(ValueError):
        SACConfig(ent_coef="sometimes")


def test_td3_delays_the_actor_and_targets() -> None:
    learner = _td3(policy_delay=2)
    actor0 = _values(learner.actor.trainable_variables)
    targets0 = _values(learner.target_actor.trainable_variables + learner.target_critic.trainable_variables)
    critic0 = _values(learner.critic.trainable_variables)
    metrics = learner.update(_batch(1))
    assert tuple(metrics) == TD3_METRICS and metrics["actor_loss"] == 0.0
    for a, b in zip(_values(learner.actor.trainable_variables), actor0, strict=True):
        np.testing.assert_array_equal(a, b)
    targets = learner.target_actor.trainable_variables + learner.target_critic.trainable_variables
    for a, b in zip(_values(targets), targets0, strict=True):
        np.testing.assert_array_equal(a, b)
    assert _changed(_values(learner.critic.trainable_variables), critic0)
    metrics = learner.update(_batch(1, seed=1))  # the second gradient step, in another call
    assert metrics["actor_loss"] != 0.0
    assert _changed(_values(learner.actor.trainable_variables), actor0)
    assert _changed(_values(targets), targets0)
    assert int(learner.steps.numpy()) == 2


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_updates_reduce_the_critic_loss_on_a_fixed_problem(algo: str) -> None:
    """With ``gamma = 0`` the TD target is the reward, a fixed function of (obs, action) to regress."""
    learner = _sac(gamma=0.0, lr=3e-3) if algo == "sac" else _td3(gamma=0.0, lr=3e-3)
    obs, actions, _, next_obs, terminated = _batch(1, b=64)
    rewards = (obs[..., 0] + 0.5 * actions[..., 0]).astype(np.float32)
    batch = (obs, actions, rewards, next_obs, terminated)
    first = learner.update(batch)["critic_loss"]
    k = 150
    many = tuple(np.repeat(x, k, axis=0) for x in batch)
    learner.update(many)
    last = learner.update(batch)["critic_loss"]
    assert last < 0.1 * first


def test_xla_update_matches_and_reducer_sees_each_gradient_list() -> None:
    calls: list[int] = []

    def reducer(grads: list[tf.Tensor]) -> list[tf.Tensor]:
        calls.append(len(grads))
        return grads

    actor = SquashedGaussianActor(build_network(NET, OBS, 4, seed=0), SPEC, seed=0)
    learner = SACLearner(actor, _critic(), SACConfig(), OBS, reduce_gradients=reducer)
    learner.update(_batch(2))
    assert sorted(calls) == sorted([1, len(learner.critic_params), len(learner.actor_params)])
    assert learner.update_fn._jit_compile is False  # a reducer turns XLA off by default
    with pytest.raises(ValueError, match="actions"):
        learner.update(_batch(2)[:1] + (np.zeros((2, 32, 3), np.float32),) + _batch(2)[2:])


def test_jit_compiled_sac_update_runs() -> None:
    actor = SquashedGaussianActor(build_network(NET, OBS, 4, seed=0), SPEC, seed=0)
    learner = SACLearner(actor, _critic(), SACConfig(), OBS)
    metrics = learner.update(_batch(4))
    assert all(math.isfinite(v) for v in metrics.values())


# --- configs -------------------------------------------------------------------------


def test_configs_have_sb3_defaults_and_ignore_unknown_keys() -> None:
    sac = from_settings(SACConfig, {"kind": "sac", "lr": 1e-3, "actor": "pi"})
    assert (sac.lr, sac.gamma, sac.tau, sac.ent_coef, sac.target_update_interval) == (1e-3, 0.99, 0.005, "auto", 1)
    assert sac.entropy_target(3) == -3.0
    td3 = from_settings(TD3Config, {"kind": "td3", "policy_delay": 3})
    assert (td3.lr, td3.gamma, td3.tau, td3.policy_delay) == (1e-3, 0.99, 0.005, 3)
    assert (td3.target_policy_noise, td3.target_noise_clip) == (0.2, 0.5)


def test_config_modules_import_without_tensorflow() -> None:
    code = (
        "import sys; import rlgen.algorithms.sac.config, rlgen.algorithms.td3.config; "
        "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')]; "
        "assert not bad, bad; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
