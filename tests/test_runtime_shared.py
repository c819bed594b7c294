"""Tests of networks shared by a policy and a value: one torso, one output head per component."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
gym = pytest.importorskip("gymnasium")

from rlgen.algorithms.ppo.config import PPOConfig  # noqa: E402
from rlgen.algorithms.ppo.learner import PPOLearner  # noqa: E402
from rlgen.runtime.buffers import RolloutBuffer  # noqa: E402
from rlgen.runtime.envs import VectorEnv  # noqa: E402
from rlgen.runtime.networks import MLP, build_network, head_slices, output_heads  # noqa: E402
from rlgen.runtime.optim import Linear  # noqa: E402
from rlgen.runtime.policies import (  # noqa: E402
    ActionSpec,
    Policy,
    Value,
    distribution_and_value,
    make_act_and_value,
)
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

configure_threads(1, 1)

NET = {"kind": "mlp", "hidden": [64, 64], "activation": "tanh"}
CUSTOM = {"kind": "custom", "impl": "rlgen.runtime.networks:mlp", "args": {"hidden": [8]}}


def shared_components(spec: ActionSpec, obs_shape: tuple[int, ...], seed: int = 0, config=NET):
    """Policy and value on one network, as SB3's shared ``net_arch``: heads (actions, 1), gains (0.01, 1)."""
    n = spec.num_outputs
    net = build_network(config, obs_shape, (n, 1), (0.01, 1.0), seed=seed, name="shared")
    policy = Policy(net, spec, seed=seed, outputs=(0, n))
    value = Value(net, output=n)
    return net, policy, value


# --- networks with several heads -----------------------------------------------------


def test_one_head_as_sequence_is_the_plain_network() -> None:
    plain = build_network(NET, (4,), 2, 0.01, seed=3)
    listed = build_network(NET, (4,), [2], [0.01], seed=3)
    broadcast = build_network(NET, (4,), (2,), 0.01, seed=3)
    assert plain.head_slices == listed.head_slices == ((0, 2),) and plain.output_size == 2
    for net in (listed, broadcast):
        assert len(net.trainable_variables) == len(plain.trainable_variables)
        for a, b in zip(plain.trainable_variables, net.trainable_variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_heads_have_their_own_init_gain_on_one_torso() -> None:
    net = MLP((4,), [64, 64], (3, 1), output_gain=(0.01, 1.0), seed=3)
    assert net.head_sizes == (3, 1) and net.head_slices == ((0, 3), (3, 4)) and net.output_size == 4
    w = net.head.w.numpy()
    assert w.shape == (64, 4)
    policy_w, value_w = w[:, :3], w[:, 3:]
    np.testing.assert_allclose(policy_w.T @ policy_w, 1e-4 * np.eye(3), atol=1e-8)  # orthogonal, gain 0.01
    np.testing.assert_allclose(value_w.T @ value_w, [[1.0]], atol=1e-5)  # orthogonal, gain 1
    assert policy_w.std() / value_w.std() == pytest.approx(0.01, rel=0.3)
    # the torso is the one a single-head network of the same seed gets (hidden layers are drawn first)
    alone = MLP((4,), [64, 64], 3, output_gain=0.01, seed=3)
    for a, b in zip(alone.hidden, net.hidden, strict=True):
        np.testing.assert_array_equal(a.w.numpy(), b.w.numpy())
    np.testing.assert_array_equal(alone.head.w.numpy(), policy_w)
    # outputs are the heads' outputs concatenated, from the one shared latent
    x = tf.constant(np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32))
    h = x
    for layer in net.hidden:
        h = tf.tanh(layer(h))
    out = net(x).numpy()
    assert out.shape == (5, 4)
    np.testing.assert_allclose(out[:, :3], (h @ policy_w).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 3], (h @ value_w)[:, 0].numpy(), rtol=1e-5, atol=1e-6)


def test_head_arguments_are_checked() -> None:
    assert output_heads((2, 1), 0.5) == ((2, 0.5), (1, 0.5))
    assert output_heads(np.int64(4)) == ((4, 1.0),)
    assert head_slices([2, 3, 1]) == ((0, 2), (2, 5), (5, 6))
    with pytest.raises(ValueError, match="2 output gains for 3 output heads"):
        build_network(NET, (4,), (2, 1, 1), (0.01, 1.0))
    with pytest.raises(ValueError, match="at least one"):
        build_network(NET, (4,), ())
    with pytest.raises(ValueError, match=">= 1"):
        MLP((4,), [8], (2, 0))


def test_custom_network_refuses_several_heads() -> None:
    with pytest.raises(ValueError, match="cannot have several output heads"):
        build_network(CUSTOM, (3,), (2, 1), (0.01, 1.0))
    one = build_network(CUSTOM, (3,), [5], [0.01])  # one head is fine, as a sequence too
    assert one(tf.zeros([2, 3])).shape == (2, 5)


# --- policy and value over one network -----------------------------------------------


@pytest.mark.parametrize("spec", [ActionSpec(n=3), ActionSpec(shape=(2,), low=(-1.0, -1.0), high=(1.0, 1.0))])
def test_policy_and_value_read_disjoint_outputs(spec: ActionSpec) -> None:
    net, policy, value = shared_components(spec, (4,), seed=1)
    n = spec.num_outputs
    obs = tf.constant(np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32))
    out = net(obs).numpy()
    dist = policy.distribution(obs)
    head = dist.logits if spec.discrete else dist.mean
    np.testing.assert_array_equal(head.numpy(), out[:, :n])
    np.testing.assert_array_equal(value(obs).numpy(), out[:, n])
    assert value(obs).shape == (6,)
    action, logp = policy.act(obs)
    assert action.shape == ((6,) if spec.discrete else (6, n)) and logp.shape == (6,)
    # each component's gradient reaches its own head's columns only, and the shared torso
    with tf.GradientTape(persistent=True) as tape:
        p_loss = tf.reduce_sum(policy.distribution(obs).log_prob(action))
        v_loss = tf.reduce_sum(tf.square(value(obs)))
    for loss, mine, other in ((p_loss, slice(0, n), slice(n, n + 1)), (v_loss, slice(n, n + 1), slice(0, n))):
        gw, gb, g0 = tape.gradient(loss, [net.head.w, net.head.b, net.hidden[0].w])
        assert np.abs(gw.numpy()[:, mine]).sum() > 0 and np.abs(gb.numpy()[mine]).sum() > 0
        np.testing.assert_array_equal(gw.numpy()[:, other], 0.0)
        np.testing.assert_array_equal(gb.numpy()[other], 0.0)
        assert np.abs(g0.numpy()).sum() > 0
    # the fused inference call reads the same two heads
    action, logp, v = make_act_and_value(policy, value, (4,), deterministic=True)(obs.numpy())
    np.testing.assert_allclose(v, out[:, n], rtol=1e-5, atol=1e-6)
    if spec.discrete:
        np.testing.assert_array_equal(action, out[:, :n].argmax(-1))
    else:
        np.testing.assert_allclose(action, out[:, :n], rtol=1e-5, atol=1e-6)


def test_output_selection_is_checked() -> None:
    spec = ActionSpec(n=3)
    net = build_network(NET, (4,), (3, 1), (0.01, 1.0))
    with pytest.raises(ValueError, match="pass outputs="):
        Policy(net, spec)  # the default reads all 4 outputs: not 3 logits
    with pytest.raises(ValueError, match="pass output="):
        Value(net)
    with pytest.raises(ValueError, match="hold 2 values"):
        Policy(net, spec, outputs=(0, 2))
    with pytest.raises(ValueError, match="not a slice"):
        Policy(net, spec, outputs=(2, 5))
    with pytest.raises(ValueError, match="not one of"):
        Value(net, output=4)
    # defaults are unchanged for one-head networks
    Policy(build_network(NET, (4,), 3, 0.01), spec)
    Value(build_network(NET, (4,), 1))


# --- PPO with a shared network -------------------------------------------------------


def make_shared_ppo(seed: int, num_envs: int, n_steps: int, config: PPOConfig, env_id: str = "CartPole-v1"):
    env = VectorEnv(env_id, num_envs, seed=seed)
    obs_shape = env.observation_space.shape
    spec = ActionSpec.from_space(env.action_space)
    net, policy, value = shared_components(spec, obs_shape, seed=seed)
    learner = PPOLearner(policy, value, config, n_steps, num_envs, obs_shape, seed=seed)
    act = make_act_and_value(policy, value, obs_shape)
    buffer = RolloutBuffer(n_steps, num_envs, obs_shape, (*spec.shape,), spec.np_dtype)
    return env, net, learner, act, buffer


def collect(env, act, buffer, obs: np.ndarray) -> np.ndarray:
    for _ in range(buffer.length):
        action, logp, value = act(obs)
        next_obs, reward, terminated, truncated = env.step(action)
        buffer.insert(obs, action, reward, terminated, truncated, logp, value)
        obs = next_obs
    return obs


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_step_on_shared_network_trains_torso_and_both_heads(env_id: str) -> None:
    env, net, learner, act, buffer = make_shared_ppo(0, 4, 32, PPOConfig(epochs=2, minibatch=64), env_id)
    gaussian = learner.policy.kind == "gaussian"
    # each variable once: the shared network's, plus the Gaussian's log_std
    ids = [id(v) for v in learner.params]
    assert len(ids) == len(set(ids)) == len(net.trainable_variables) + int(gaussian)
    assert {id(v) for v in net.trainable_variables} <= set(ids)
    module_ids = [id(v) for v in learner.trainable_variables]
    assert len(module_ids) == len(set(module_ids)) == len(ids)
    obs = collect(env, act, buffer, env.reset())
    n = learner.policy.action_spec.num_outputs
    before = {"torso": [layer.w.numpy() for layer in net.hidden], "head": net.head.w.numpy()}
    metrics = learner.update(buffer, obs, 0.0)
    assert all(np.isfinite(v) for k, v in metrics.items() if k != "explained_variance")
    assert metrics["value_loss"] > 0.0
    for old, layer in zip(before["torso"], net.hidden, strict=True):
        assert not np.allclose(old, layer.w.numpy())
    head = net.head.w.numpy()
    assert not np.allclose(before["head"][:, :n], head[:, :n])  # policy head
    assert not np.allclose(before["head"][:, n:], head[:, n:])  # value head


class CountingNetwork(tf.Module):
    """A real network that counts how often a graph calls it (at trace time)."""

    def __init__(self, inner: tf.Module) -> None:
        super().__init__(name="counting")
        self.inner, self.calls = inner, 0
        self.output_size = inner.output_size

    def __call__(self, x):
        self.calls += 1
        return self.inner(x)


def test_shared_network_runs_once_per_step_with_the_two_calls_results() -> None:
    spec = ActionSpec(n=2)
    net = build_network(NET, (4,), (2, 1), (0.01, 1.0), seed=3, name="shared")
    counting = CountingNetwork(net)
    policy, value = Policy(counting, spec, outputs=(0, 2)), Value(counting, output=2)
    obs = tf.constant(np.random.default_rng(0).standard_normal((16, 4)), tf.float32)
    actions = tf.constant(np.arange(16) % 2, tf.int32)

    def loss(fused: bool) -> tf.Tensor:
        if fused:
            dist, values = distribution_and_value(policy, value, obs)
        else:
            dist, values = policy.distribution(obs), value.value(obs)
        return tf.reduce_mean(dist.log_prob(actions)) + tf.reduce_mean(tf.square(values))

    grads = {}
    for fused in (True, False):
        counting.calls = 0
        with tf.GradientTape() as tape:
            out = loss(fused)
        grads[fused] = (out, tape.gradient(out, net.trainable_variables))
        assert counting.calls == (1 if fused else 2)
    np.testing.assert_allclose(grads[True][0], grads[False][0], rtol=1e-6)
    for a, b in zip(grads[True][1], grads[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    # a value on its own network (or a policy computing its own way) is called as it is
    other = Value(build_network(NET, (4,), 1, 1.0, seed=4, name="v"))
    counting.calls = 0
    distribution_and_value(policy, other, obs)
    assert counting.calls == 1


def test_ppo_update_calls_a_shared_network_once_per_minibatch() -> None:
    spec = ActionSpec(n=2)
    net = build_network(NET, (4,), (2, 1), (0.01, 1.0), seed=0, name="shared")
    counting = CountingNetwork(net)
    policy, value = Policy(counting, spec, outputs=(0, 2)), Value(counting, output=2)
    counting.calls = 0
    PPOLearner(policy, value, PPOConfig(epochs=2, minibatch=64), 32, 4, (4,))  # traces its update
    assert counting.calls == 2  # the minibatch step (a loop body, traced once) and the last value


def test_shared_checkpoint_roundtrip(tmp_path) -> None:
    env, net, learner, act, buffer = make_shared_ppo(2, 4, 16, PPOConfig(epochs=2, minibatch=32))
    obs = collect(env, act, buffer, env.reset())
    ckpt = tf.train.Checkpoint(learner=learner)
    path = ckpt.save(str(tmp_path / "ckpt"))
    learner.update(buffer, obs, 0.5)
    first = [v.numpy() for v in learner.params]
    ckpt.restore(path).assert_consumed()
    learner.update(buffer, obs, 0.5)
    for x, v in zip(first, learner.params, strict=True):
        np.testing.assert_array_equal(x, v.numpy())


def test_ppo_with_shared_network_learns_cartpole() -> None:
    """A short run (12.8k steps) is far from solving CartPole but clearly learns: random play scores about 22."""
    config = PPOConfig(
        lr=Linear(1e-3, 0.0), clip=Linear(0.2, 0.0), gamma=0.98, gae_lambda=0.8, epochs=20, minibatch=256
    )
    env, _, learner, act, buffer = make_shared_ppo(0, 8, 32, config)
    obs, updates, late = env.reset(), 50, []
    for i in range(updates):
        obs = collect(env, act, buffer, obs)
        learner.update(buffer, obs, i / updates)
        episodes = env.drain_episodes()
        if i >= updates - 10:
            late += [ret for ret, _ in episodes]
    assert len(late) > 5 and np.mean(late) >= 60.0, late
