"""Tests of the off-policy runtime pieces: replay buffer, Q network, DQN learner."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
gym = pytest.importorskip("gymnasium")

from rlgen.algorithms.base import from_settings  # noqa: E402
from rlgen.algorithms.dqn.config import DQNConfig  # noqa: E402
from rlgen.algorithms.dqn.learner import DQNLearner, huber  # noqa: E402
from rlgen.runtime.envs import VectorEnv  # noqa: E402
from rlgen.runtime.evaluation.episodes import evaluate  # noqa: E402
from rlgen.runtime.networks import MLP, build_network  # noqa: E402
from rlgen.runtime.qvalue import Exploration, QNetwork, make_q_actor  # noqa: E402
from rlgen.runtime.replay import ReplayBuffer  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

configure_threads(1, 1)


def _step(t: int, b: int) -> tuple[np.ndarray, ...]:
    """A vector step whose every field encodes ``(t, env)`` so stored rows can be traced."""
    ident = 100.0 * t + np.arange(b)
    obs = np.repeat(ident[:, None], 3, axis=1).astype(np.float32)
    return obs, (ident % 7).astype(np.int32), ident.astype(np.float32), obs + 0.5, (ident % 2).astype(np.float32)


# --- replay buffer -------------------------------------------------------------------


def test_replay_skips_invalid_rows_and_wraps_around() -> None:
    buf = ReplayBuffer(5, (3,), (), np.int32, num_envs=2)
    valid_pattern = [[True, True], [False, True], [True, False], [False, False], [True, True]]
    stored: list[float] = []
    for t, valid in enumerate(valid_pattern):
        obs, act, rew, nxt, term = _step(t, 2)
        n = buf.insert(obs, act, rew, nxt, term, np.array(valid))
        assert n == sum(valid)
        stored.extend(rew[np.array(valid)].tolist())
    assert buf.inserted == 6 and len(buf) == 5 and buf.full
    # 6 valid rows into 5 slots: the last overwrote slot 0
    data = buf.transitions()
    expect = stored[5:] + stored[1:5]
    np.testing.assert_array_equal(data.rewards, expect)
    assert buf.pos == 1
    for i, ident in enumerate(expect):  # every field of a row belongs to the same transition
        np.testing.assert_array_equal(data.obs[i], [ident] * 3)
        np.testing.assert_array_equal(data.next_obs[i], [ident + 0.5] * 3)
        assert data.actions[i] == int(ident) % 7
        assert data.terminated[i] == int(ident) % 2
    # nothing valid: nothing stored
    assert buf.insert(*_step(9, 2), np.array([False, False])) == 0 and buf.pos == 1


def test_replay_insert_larger_than_capacity_keeps_last_rows() -> None:
    buf = ReplayBuffer(3, (3,), num_envs=5)
    obs, act, rew, nxt, term = _step(1, 5)
    assert buf.insert(obs, act, rew, nxt, term) == 3
    assert sorted(buf.transitions().rewards.tolist()) == [102.0, 103.0, 104.0]
    with pytest.raises(ValueError):
        buf.insert(obs[:2], act[:2], rew[:2], nxt[:2], term[:2])


def test_replay_sample_shapes_and_contents() -> None:
    buf = ReplayBuffer(50, (3,), (), np.int32, num_envs=4)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        buf.sample(8, rng)
    for t in range(6):  # 24 rows minus the invalid ones: not full, so slots >= size are zeros
        buf.insert(*_step(t, 4), np.array([True, t % 2 == 0, True, False]))
    stored = set(buf.transitions().rewards.tolist())
    assert len(buf) == len(stored) == 6 * 2 + 3
    one = buf.sample(16, rng)
    assert one.obs.shape == (16, 3) and one.actions.shape == (16,) and one.rewards.shape == (16,)
    assert one.next_obs.shape == (16, 3) and one.terminated.shape == (16,) and one.actions.dtype == np.int32
    many = buf.sample_many(7, 32, rng)
    assert many.obs.shape == (7, 32, 3) and many.actions.shape == (7, 32) and many.terminated.shape == (7, 32)
    assert set(many.rewards.ravel().tolist()) <= stored
    assert len(set(many.rewards.ravel().tolist())) == len(stored)  # 224 draws from 15 hit them all
    # rows stay whole: obs, action, next_obs and terminated match the reward's transition
    np.testing.assert_array_equal(many.obs[..., 0], many.rewards)
    np.testing.assert_array_equal(many.next_obs[..., 2], many.rewards + 0.5)
    np.testing.assert_array_equal(many.actions, many.rewards.astype(np.int64) % 7)
    np.testing.assert_array_equal(many.terminated, many.rewards.astype(np.int64) % 2)


def test_replay_with_vector_env_reset_steps() -> None:
    env = VectorEnv("CartPole-v1", 3, seed=0)
    buf = ReplayBuffer(10_000, env.observation_space.shape, num_envs=3)
    obs = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(300):
        action = rng.integers(0, 2, 3).astype(np.int32)
        next_obs, reward, terminated, _ = env.step(action)
        buf.insert(obs, action, reward, next_obs, terminated, env.valid)
        obs = next_obs
    env.close()
    assert buf.inserted == env.env_steps < 900
    data = buf.transitions()
    assert np.all(data.rewards == 1.0)  # reset steps (reward 0) never stored
    # a stored transition's next_obs is one physics step from obs: never a fresh reset jump
    assert np.max(np.abs(data.next_obs[:, 0] - data.obs[:, 0])) < 0.05


# --- exploration and acting ----------------------------------------------------------


def test_exploration_schedule_matches_sb3_linear_fn() -> None:
    sched = Exploration(1.0, 0.04, 0.16)
    assert sched(0.0) == 1.0
    assert sched(0.08) == pytest.approx(0.52)
    assert sched(0.16) == pytest.approx(0.04)
    assert sched(0.5) == 0.04 and sched(1.0) == 0.04
    assert Exploration.from_spec({"final": 0.1}) == Exploration(1.0, 0.1, 0.1)
    assert Exploration(0.5, 0.1, 0.0)(0.0) == 0.1


def test_exploration_is_one_before_random_until_in_python_and_in_graph() -> None:
    sched = Exploration(1.0, 0.01, 0.1, random_until=0.2)  # SB3: learning_starts after ε's decay
    for progress, want in ((0.0, 1.0), (0.05, 1.0), (0.19, 1.0), (0.2, 0.01), (0.5, 0.01)):
        assert sched(progress) == pytest.approx(want)
        assert float(sched.epsilon(tf.constant(progress))) == pytest.approx(want)
    early = Exploration(1.0, 0.01, 0.1, random_until=0.02)  # before it: 1; after: the schedule
    assert early(0.01) == 1.0 and early(0.05) == pytest.approx(Exploration(1.0, 0.01, 0.1)(0.05))
    assert float(early.epsilon(tf.constant(0.05))) == pytest.approx(early(0.05))
    assert Exploration.from_spec({"random_until": 0.3}).random_until == 0.3


def test_q_act_greedy_and_epsilon() -> None:
    net = build_network({"hidden": [8], "activation": "relu"}, (4,), 3, seed=1)
    q = QNetwork(net, 3, seed=0)
    actor = make_q_actor(q, (4,))
    obs = np.random.default_rng(0).normal(size=(2000, 4)).astype(np.float32)
    greedy = np.argmax(net(obs).numpy(), axis=1)
    np.testing.assert_array_equal(actor(obs, 0.0), greedy)
    np.testing.assert_array_equal(actor.greedy(obs), greedy)
    rand = actor(obs, 1.0)
    assert set(np.unique(rand).tolist()) == {0, 1, 2}
    assert abs(np.mean(rand != greedy) - 2 / 3) < 0.05
    half = actor(obs, 0.5)  # random with prob .5, and a random pick is greedy 1/3 of the time
    assert abs(np.mean(half != greedy) - 1 / 3) < 0.05
    first, second = (make_q_actor(QNetwork(net, 3, seed=5), (4,)) for _ in range(2))
    np.testing.assert_array_equal(first(obs, 0.5), second(obs, 0.5))  # the same seed draws the same stream


# --- DQN learner ---------------------------------------------------------------------


def _np_forward(net: MLP, x: np.ndarray) -> np.ndarray:
    h = x
    for layer in net.hidden:
        h = np.maximum(h @ layer.w.numpy() + layer.b.numpy(), 0.0)
    return h @ net.head.w.numpy() + net.head.b.numpy()


def _np_huber(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    return np.where(a < 1.0, 0.5 * x * x, a - 0.5)


def _learner(double: bool, lr: float = 1e-3, tau: float = 1.0, max_grad_norm: float | None = 10.0) -> DQNLearner:
    net = build_network({"hidden": [16, 16], "activation": "relu"}, (3,), 4, seed=3)
    config = DQNConfig(lr=lr, gamma=0.9, double=double, tau=tau, max_grad_norm=max_grad_norm)
    return DQNLearner(QNetwork(net, 4), config, (3,))


def _batch(rng: np.random.Generator, k: int, b: int) -> tuple[np.ndarray, ...]:
    return (
        rng.normal(size=(k, b, 3)).astype(np.float32),
        rng.integers(0, 4, (k, b)).astype(np.int32),
        rng.normal(size=(k, b)).astype(np.float32) * 3.0,  # some |TD error| > 1: both Huber branches
        rng.normal(size=(k, b, 3)).astype(np.float32),
        (rng.random((k, b)) < 0.3).astype(np.float32),
    )


def test_huber_matches_smooth_l1() -> None:
    x = np.linspace(-3, 3, 61).astype(np.float32)
    np.testing.assert_allclose(huber(tf.constant(x)).numpy(), _np_huber(x), rtol=1e-6)


@pytest.mark.parametrize("double", [False, True])
def test_dqn_loss_and_td_target_match_numpy(double: bool) -> None:
    learner = _learner(double)
    online, target = learner.q.network, learner.target.network
    # make the target differ from the online network so the double-DQN choice matters
    for v in target.trainable_variables:
        v.assign(v + tf.random.stateless_normal(v.shape, [1, 2]) * 0.5)
    rng = np.random.default_rng(0)
    obs, actions, rewards, next_obs, terminated = (x[0] for x in _batch(rng, 1, 256))
    q_next_target = _np_forward(target, next_obs)
    if double:
        best = np.argmax(_np_forward(online, next_obs), axis=1)
        next_v = q_next_target[np.arange(256), best]
        assert np.any(best != np.argmax(q_next_target, axis=1))  # the test can tell the two apart
    else:
        next_v = q_next_target.max(axis=1)
    y = rewards + 0.9 * (1.0 - terminated) * next_v
    q_taken = _np_forward(online, obs)[np.arange(256), actions]
    expected = _np_huber(q_taken - y).mean()
    assert np.any(np.abs(q_taken - y) > 1.0) and np.any(np.abs(q_taken - y) < 1.0)

    np.testing.assert_allclose(learner.td_target(rewards, next_obs, terminated).numpy(), y, rtol=1e-4, atol=1e-5)
    loss, q, _ = learner.loss(obs, actions, rewards, next_obs, terminated)
    np.testing.assert_allclose(q.numpy(), q_taken, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-4)
    # the compiled update reports the loss before its step and moves the online weights only
    before = [v.numpy() for v in target.trainable_variables]
    metrics = learner.update((obs, actions, rewards, next_obs, terminated), progress=0.0)
    assert metrics["loss"] == pytest.approx(float(expected), rel=1e-4)
    assert metrics["q"] == pytest.approx(float(q_taken.mean()), rel=1e-4, abs=1e-5)
    assert metrics["target_q"] == pytest.approx(float(y.mean()), rel=1e-4, abs=1e-5)
    assert metrics["lr"] == pytest.approx(1e-3)
    for b, v in zip(before, target.trainable_variables, strict=True):
        np.testing.assert_array_equal(b, v.numpy())
    new_loss = learner.loss(obs, actions, rewards, next_obs, terminated)[0].numpy()
    assert new_loss < expected


def test_dqn_update_k_steps_equals_k_single_steps() -> None:
    rng = np.random.default_rng(1)
    batches = _batch(rng, 5, 32)
    fused, single = _learner(True), _learner(True)
    m = fused.update(batches, 0.3)
    losses = [single.update(tuple(x[k] for x in batches), 0.3)["loss"] for k in range(5)]
    assert m["loss"] == pytest.approx(np.mean(losses), rel=1e-4)
    for a, b in zip(fused.q.trainable_variables, single.q.trainable_variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert fused.optimizer.step.numpy() == 5.0


def test_dqn_gradient_clipping_reports_unclipped_norm() -> None:
    rng = np.random.default_rng(2)
    obs, actions, rewards, next_obs, terminated = _batch(rng, 1, 64)
    learner = _learner(False, lr=0.0, max_grad_norm=1e-3)
    with tf.GradientTape() as tape:
        loss = learner.loss(obs[0], actions[0], rewards[0] * 100.0, next_obs[0], terminated[0])[0]
    norm = tf.linalg.global_norm(tape.gradient(loss, learner.params)).numpy()
    m = learner.update((obs, actions, rewards * 100.0, next_obs, terminated))
    assert m["grad_norm"] == pytest.approx(float(norm), rel=1e-4) and norm > 0.1


def test_sync_target_hard_and_soft() -> None:
    hard = _learner(False)
    online, target = hard.q.trainable_variables, hard.target.trainable_variables
    assert all(a is not b for a, b in zip(online, target, strict=True))
    for a, b in zip(online, target, strict=True):  # the copy starts equal
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    hard.update(_batch(np.random.default_rng(0), 3, 16))
    assert any(not np.array_equal(a.numpy(), b.numpy()) for a, b in zip(online, target, strict=True))
    hard.sync_target()
    for a, b in zip(online, target, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    soft = _learner(False, tau=0.25)
    online, target = soft.q.trainable_variables, soft.target.trainable_variables
    soft.update(_batch(np.random.default_rng(0), 3, 16))
    o, t = [v.numpy() for v in online], [v.numpy() for v in target]
    soft.sync_target()
    for oo, tt, v in zip(o, t, target, strict=True):
        np.testing.assert_allclose(v.numpy(), 0.25 * oo + 0.75 * tt, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        _learner(False, tau=0.0)


def test_dqn_config_from_settings() -> None:
    c = from_settings(DQNConfig, {"kind": "dqn", "q": "q", "lr": 2.3e-3, "double": True, "optimizer": {"kind": "adam"}})
    assert (c.lr, c.double, c.gamma, c.tau, c.max_grad_norm) == (2.3e-3, True, 0.99, 1.0, 10.0)
    assert DQNConfig().optimizer == {"kind": "adam", "eps": 1.0e-8} and DQNConfig().lr == 1e-4


# --- learning ------------------------------------------------------------------------


def test_dqn_learns_cartpole() -> None:
    """RL Zoo settings, shortened to 30k steps: the greedy policy must balance well."""
    seed, total, starts, train_freq, grad_steps = 0, 30_000, 1000, 256, 128
    start = time.perf_counter()
    env = VectorEnv("CartPole-v1", 1, seed=seed)
    net = build_network({"hidden": [256, 256], "activation": "relu", "init": "glorot_uniform"}, (4,), 2, seed=seed)
    q = QNetwork(net, 2, seed=seed)
    learner = DQNLearner(q, DQNConfig(lr=2.3e-3), (4,))
    actor = make_q_actor(q, (4,))
    buf = ReplayBuffer(100_000, (4,), num_envs=1)
    eps = Exploration(1.0, 0.04, 0.16)
    rng = np.random.default_rng(seed)
    obs = env.reset()
    for step in range(1, total + 1):
        action = actor(obs, eps((step - 1) / total))
        next_obs, reward, terminated, _ = env.step(action)
        buf.insert(obs, action, reward, next_obs, terminated, env.valid)
        obs = next_obs
        if step % train_freq == 0 and step > starts:
            learner.sync_target()
            metrics = learner.update(buf.sample_many(grad_steps, 64, rng), step / total)
            assert np.isfinite(metrics["loss"])
    env.close()
    returns = evaluate(actor.greedy_fn(), {"id": "CartPole-v1"}, 10, seed=123)
    elapsed = time.perf_counter() - start
    print(f"greedy eval returns {returns.tolist()} after {total} steps, {elapsed:.1f} s")
    assert returns.mean() >= 150.0, (returns, elapsed)
    assert elapsed < 120.0
