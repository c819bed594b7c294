"""Tests of the runtime's learning core: distributions, optimisers, GAE, envs, PPO."""

from __future__ import annotations

import gc
import math
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
gym = pytest.importorskip("gymnasium")

from rlgen.algorithms.ppo.config import PPOConfig  # noqa: E402
from rlgen.algorithms.ppo.learner import PPOLearner, gae, update_metrics, vtrace  # noqa: E402
from rlgen.runtime.buffers import RolloutBuffer  # noqa: E402
from rlgen.runtime.distributions import Categorical, DiagGaussian  # noqa: E402
from rlgen.runtime.envs import VectorEnv  # noqa: E402
from rlgen.runtime.networks import MLP, build_network  # noqa: E402
from rlgen.runtime.optim import (  # noqa: E402
    Adam,
    Linear,
    RMSprop,
    as_schedule,
    build_optimizer,
    clip_by_global_norm,
)
from rlgen.runtime.policies import ActionSpec, Policy, Value, make_act_and_value  # noqa: E402
from rlgen.runtime.tfutil import (  # noqa: E402
    assigner,
    concrete_caller,
    configure_threads,
    flat_caller,
    numpy_caller,
)

configure_threads(1, 1)


# --- distributions -------------------------------------------------------------------


def test_categorical_log_prob_entropy_and_sampling() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 3)).astype(np.float32)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    dist = Categorical(tf.constant(logits))
    actions = np.array([0, 1, 2, 1, 0], np.int32)
    np.testing.assert_allclose(dist.log_prob(actions), np.log(p[np.arange(5), actions]), rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), -(p * np.log(p)).sum(-1), rtol=1e-5)
    np.testing.assert_array_equal(dist.mode(), p.argmax(-1))
    many = Categorical(tf.constant(np.repeat(logits[:1], 20000, axis=0)))
    samples = many.sample(tf.random.Generator.from_seed(1)).numpy()
    freq = np.bincount(samples, minlength=3) / samples.size
    np.testing.assert_allclose(freq, p[0], atol=0.015)


def test_diag_gaussian_log_prob_entropy_and_sampling() -> None:
    mean = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)
    log_std = np.array([0.3, -0.7], np.float32)
    x = np.array([[0.0, 0.0], [1.0, 1.0]], np.float32)
    std = np.exp(log_std)
    expected = (-0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
    dist = DiagGaussian(tf.constant(mean), tf.constant(log_std))
    np.testing.assert_allclose(dist.log_prob(x), expected, rtol=1e-5)
    entropy = (0.5 + 0.5 * math.log(2 * math.pi) + log_std).sum()
    np.testing.assert_allclose(dist.entropy(), [entropy, entropy], rtol=1e-5)
    np.testing.assert_array_equal(dist.mode(), mean)
    wide = DiagGaussian(tf.zeros([20000, 2]) + mean[0], tf.constant(log_std))
    s = wide.sample(tf.random.Generator.from_seed(2)).numpy()
    np.testing.assert_allclose(s.mean(0), mean[0], atol=0.03)
    np.testing.assert_allclose(s.std(0), std, rtol=0.03)


# --- optimisers ----------------------------------------------------------------------


def test_adam_matches_hand_computed_steps() -> None:
    w = tf.Variable([1.0, -2.0])
    opt = Adam([w], beta1=0.9, beta2=0.999, eps=1e-5)
    g1, g2, lr = np.array([0.5, 0.1]), np.array([-0.2, 0.3]), 0.01
    opt.apply([tf.constant(g1, tf.float32)], lr)
    # step 1: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + eps)
    p1 = np.array([1.0, -2.0]) - lr * g1 / (np.abs(g1) + 1e-5)
    np.testing.assert_allclose(w.numpy(), p1, rtol=1e-6)
    opt.apply([tf.constant(g2, tf.float32)], lr)
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.999 * 0.001 * g1**2 + 0.001 * g2**2
    p2 = p1 - lr * (m / (1 - 0.9**2)) / (np.sqrt(v / (1 - 0.999**2)) + 1e-5)
    np.testing.assert_allclose(w.numpy(), p2, rtol=1e-6)


def test_rmsprop_matches_hand_computed_steps() -> None:
    w = tf.Variable([1.0, -2.0])
    opt = RMSprop([w], alpha=0.99, eps=1e-5)
    g1, g2, lr = np.array([0.5, 0.1]), np.array([-0.2, 0.3]), 0.01
    opt.apply([tf.constant(g1, tf.float32)], lr)
    v1 = 0.01 * g1**2
    p1 = np.array([1.0, -2.0]) - lr * g1 / (np.sqrt(v1) + 1e-5)
    np.testing.assert_allclose(w.numpy(), p1, rtol=1e-6)
    opt.apply([tf.constant(g2, tf.float32)], lr)
    v2 = 0.99 * v1 + 0.01 * g2**2
    np.testing.assert_allclose(w.numpy(), p1 - lr * g2 / (np.sqrt(v2) + 1e-5), rtol=1e-6)


def test_tf_like_rmsprop_starts_its_average_at_one_and_adds_eps_under_the_root() -> None:
    """TensorFlow 1's RMSProp (Stable-Baselines3's RMSpropTFLike): v starts at 1, p -= lr*g/sqrt(v+eps)."""
    w = tf.Variable([1.0, -2.0])
    opt = RMSprop([w], alpha=0.99, eps=1e-5, tf_like=True)
    g1, g2, lr = np.array([0.5, 0.1]), np.array([-0.2, 0.3]), 0.01
    opt.apply([tf.constant(g1, tf.float32)], lr)
    v1 = 0.99 + 0.01 * g1**2
    p1 = np.array([1.0, -2.0]) - lr * g1 / np.sqrt(v1 + 1e-5)
    np.testing.assert_allclose(w.numpy(), p1, rtol=1e-6)
    opt.apply([tf.constant(g2, tf.float32)], lr)
    v2 = 0.99 * v1 + 0.01 * g2**2
    np.testing.assert_allclose(w.numpy(), p1 - lr * g2 / np.sqrt(v2 + 1e-5), rtol=1e-6)
    built = build_optimizer({"kind": "rmsprop", "alpha": 0.9, "eps": 0.01, "tf_like": True}, [tf.Variable([0.0])])
    assert built.tf_like and (built.alpha, built.eps) == (0.9, 0.01) and built.v[0].numpy()[0] == 1.0
    assert not build_optimizer({"kind": "rmsprop", "alpha": 0.99, "eps": 1e-5}, [w]).tf_like


def test_clip_by_global_norm_and_schedules() -> None:
    grads, norm = clip_by_global_norm([tf.constant([3.0]), tf.constant([4.0])], 1.0)
    assert norm.numpy() == pytest.approx(5.0)
    np.testing.assert_allclose([g.numpy()[0] for g in grads], [0.6, 0.8], rtol=1e-5)
    small, _ = clip_by_global_norm([tf.constant([0.3])], 1.0)
    assert small[0].numpy()[0] == pytest.approx(0.3)
    lin = as_schedule({"schedule": "linear", "start": 1e-3, "end": 0.0})
    assert lin(0.25).numpy() == pytest.approx(7.5e-4)
    assert lin(2.0).numpy() == pytest.approx(0.0)
    assert as_schedule(0.2)(0.9).numpy() == pytest.approx(0.2)
    assert as_schedule(Linear(0.2, 0.1))(0.5).numpy() == pytest.approx(0.15)


# --- networks ------------------------------------------------------------------------


def test_mlp_orthogonal_init_and_custom_factory() -> None:
    net = MLP((4,), [64, 64], 2, output_gain=0.01, seed=3)
    w = net.hidden[1].w.numpy()
    np.testing.assert_allclose(w.T @ w, 2.0 * np.eye(64), atol=1e-4)  # gain sqrt(2)
    head = net.head.w.numpy()
    np.testing.assert_allclose(head.T @ head, 1e-4 * np.eye(2), atol=1e-8)
    assert net(tf.zeros([5, 4])).shape == (5, 2)
    same = build_network({"kind": "mlp", "hidden": [64, 64]}, (4,), 2, 0.01, seed=3)
    np.testing.assert_array_equal(same.hidden[0].w.numpy(), net.hidden[0].w.numpy())
    custom = build_network({"kind": "custom", "impl": "rlgen.runtime.networks:mlp", "args": {"hidden": [8]}}, (3,), 5)
    assert custom(tf.zeros([2, 3])).shape == (2, 5)
    with pytest.raises(ValueError):
        build_network({"kind": "custom", "impl": "no_colon"}, (3,), 5)


def test_torch_uniform_init_is_pytorchs_default_weights_and_biases() -> None:
    """PyTorch's nn.Linear and nn.Conv2d: weights U(±1/sqrt(fan_in)) (kaiming_uniform_, a=sqrt(5))
    and biases from the same range, drawn after each layer's weights; other inits keep zero biases."""

    def assert_uniform(x: np.ndarray, fan_in: int, rel: float) -> None:
        bound = 1.0 / math.sqrt(fan_in)
        assert np.abs(x).max() <= bound and np.abs(x).max() > 0.9 * bound  # the whole range, no gain
        assert x.std() == pytest.approx(bound / math.sqrt(3.0), rel=rel)  # uniform, not normal

    mlp = build_network({"kind": "mlp", "hidden": [256, 256], "init": "torch_uniform"}, (4,), 3, 1.0, seed=2)
    for layer, fan_in in ((mlp.hidden[0], 4), (mlp.hidden[1], 256), (mlp.head, 256)):
        assert_uniform(layer.w.numpy(), fan_in, rel=0.15)
    for layer, fan_in in ((mlp.hidden[0], 4), (mlp.hidden[1], 256)):
        assert_uniform(layer.b.numpy(), fan_in, rel=0.2)
    # the first layer's bias is the next draw after its weights, as torch.nn.Linear.reset_parameters
    rng = np.random.default_rng(2)
    rng.uniform(-0.5, 0.5, (4, 256))
    np.testing.assert_allclose(mlp.hidden[0].b.numpy(), rng.uniform(-0.5, 0.5, 256).astype(np.float32))
    cnn = build_network({"kind": "cnn", "init": "torch_uniform"}, (4, 84, 84), 4, 1.0, seed=2)
    assert_uniform(cnn.convs[0].w.numpy(), 8 * 8 * 4, rel=0.05)  # [8, 8, 4, 32]: fan_in 8 * 8 * 4
    assert_uniform(cnn.dense[0].b.numpy(), 3136, rel=0.2)  # 512 biases of the 3136 -> 512 layer
    assert np.abs(cnn.convs[0].b.numpy()).max() <= 1 / 16 and cnn.convs[0].b.numpy().std() > 0.02
    for kind in ("mlp", "cnn"):  # orthogonal draws no biases: its networks are what they were
        net = build_network({"kind": kind}, (4, 84, 84) if kind == "cnn" else (4,), 3, 1.0, seed=2)
        assert not any(v.numpy().any() for v in net.trainable_variables if v.name.startswith("b"))


def test_a_custom_factory_that_takes_a_seed_gets_the_networks(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    config = {"kind": "custom", "impl": "custom_nets:ResidualMLP", "args": {"width": 16, "blocks": 1}}

    def weights(seed: int) -> list[np.ndarray]:
        return [v.numpy() for v in build_network(config, (4,), 2, seed=seed).trainable_variables]

    first, again, other = weights(7), weights(7), weights(8)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))  # runs repeat
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    # a factory without a seed keyword is called without one (its args as given)
    plain = build_network({"kind": "custom", "impl": "test_runtime_core:unseeded_factory"}, (3,), 5, seed=1)
    assert plain(tf.zeros([2, 3])).shape == (2, 5)


def unseeded_factory(input_shape: tuple[int, ...], output_size: int) -> MLP:
    """A custom network factory that takes no seed (see the test above)."""
    return MLP(input_shape, [4], output_size, seed=0)


def test_fast_call_path_matches_public_call() -> None:
    value = Value(MLP((4,), [16], 1, seed=0))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def f(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        v = value(x)
        return v, 2.0 * v

    x = tf.constant(np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32))
    fast = flat_caller(f)(x)
    public = f(x)
    assert len(fast) == 2
    for a, b in zip(fast, public, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    from_numpy = numpy_caller(f)(x.numpy())
    np.testing.assert_array_equal(from_numpy[1], public[1].numpy())
    with pytest.raises(ValueError):
        numpy_caller(f)(np.zeros((3, 5), np.float32))


def test_fast_call_path_of_a_concrete_function_traced_or_restored_matches_its_public_call(tmp_path) -> None:
    """What evaluation calls: a function without an input signature, traced for a batch of any
    size, and the same function restored from a SavedModel (``rlgen eval``, a template)."""
    module = tf.Module()
    module.value = Value(MLP((4,), [16], 1, seed=0))
    module.act = tf.function(lambda x: 3.0 * module.value(x))
    spec = tf.TensorSpec([None, 4], tf.float32)
    module.act.get_concrete_function(spec)  # saved with the module
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    for n in (1, 7):
        x = tf.constant(np.random.default_rng(n).normal(size=(n, 4)).astype(np.float32))
        for act in (module.act, restored.act):
            concrete = act.get_concrete_function(spec)
            (fast,) = concrete_caller(concrete)(x)
            np.testing.assert_array_equal(fast.numpy(), concrete(x).numpy())
    module.value.trainable_variables[0].assign_add(tf.ones_like(module.value.trainable_variables[0]))
    (fast,) = concrete_caller(module.act.get_concrete_function(spec))(x)  # reads the variables as they are now
    np.testing.assert_array_equal(fast.numpy(), module.act(x).numpy())
    # the caller holds its function: the runtime would forget one whose tf.function is gone
    call = concrete_caller(tf.function(lambda x: 3.0 * module.value(x)).get_concrete_function(spec))
    gc.collect()
    np.testing.assert_array_equal(call(x)[0].numpy(), module.act(x).numpy())


def test_assigner_loads_every_variable_in_one_call_and_outlives_its_function() -> None:
    import gc

    net = MLP((4,), [16], 2, seed=0)
    variables = [*net.trainable_variables, tf.Variable(tf.zeros((), tf.int64))]
    load = assigner(variables)
    gc.collect()  # the graph must stay registered with the runtime while load lives
    rng = np.random.default_rng(1)
    values = [rng.normal(size=v.shape).astype(v.dtype.as_numpy_dtype) for v in variables[:-1]]
    load([*values, np.array(7)])
    for v, want in zip(variables, [*values, 7], strict=True):
        np.testing.assert_array_equal(v.numpy(), want)
    ones = np.ones_like(values[0])
    read_only = np.frombuffer(ones.tobytes(), ones.dtype).reshape(ones.shape)  # as channels unpack a frame
    load([read_only, *values[1:], np.array(8)])
    assert (variables[0].numpy() == 1).all() and variables[-1].numpy() == 8


# --- GAE -----------------------------------------------------------------------------


def gae_reference(rewards, values, last_value, terminated, truncated, gamma, lam):
    """Straightforward loops; next value of the last step is ``last_value``."""
    t_len, n_env = rewards.shape
    adv = np.zeros_like(rewards)
    for b in range(n_env):
        running = 0.0
        for t in reversed(range(t_len)):
            next_v = values[t + 1, b] if t + 1 < t_len else last_value[b]
            if terminated[t, b]:
                next_v = 0.0
            delta = rewards[t, b] + gamma * next_v - values[t, b]
            if terminated[t, b] or truncated[t, b]:
                running = 0.0
            running = delta + gamma * lam * running
            adv[t, b] = running
    return adv


def test_gae_matches_numpy_reference() -> None:
    rng = np.random.default_rng(1)
    t_len, n_env, gamma, lam = 37, 5, 0.98, 0.8
    rewards = rng.normal(size=(t_len, n_env)).astype(np.float32)
    values = rng.normal(size=(t_len, n_env)).astype(np.float32)
    last = rng.normal(size=n_env).astype(np.float32)
    terminated = (rng.random((t_len, n_env)) < 0.1).astype(np.float32)
    truncated = ((rng.random((t_len, n_env)) < 0.1) & (terminated == 0)).astype(np.float32)
    next_values = np.concatenate([values[1:], last[None]], 0)
    got = gae(
        tf.constant(rewards),
        tf.constant(values),
        tf.constant(next_values),
        tf.constant(terminated),
        tf.constant(np.maximum(terminated, truncated)),
        gamma,
        lam,
    )
    want = gae_reference(rewards, values, last, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    # truncation bootstraps from the next value, termination does not
    assert truncated.sum() > 0 and terminated.sum() > 0
    wrong = gae_reference(rewards, values, last, np.maximum(terminated, truncated), truncated, gamma, lam)
    assert not np.allclose(wrong, want)


# --- environments --------------------------------------------------------------------


class CountingEnv(gym.Env):
    """Reward ``t`` at the ``t``-th step of an episode; terminates after ``length`` steps."""

    def __init__(self, length: int = 5) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), float(self.t), self.t >= self.length, False, {}


@pytest.mark.parametrize("max_steps, length", [(None, 4), (3, 1000)])
def test_env_episode_bookkeeping_across_autoreset(max_steps: int | None, length: int) -> None:
    env = VectorEnv(factory=CountingEnv, kwargs={"length": length}, num_envs=3, max_episode_steps=max_steps)
    env.reset()
    n = max_steps or length
    rewards, valid = [], []
    for _ in range(4 * (n + 1)):
        _, reward, terminated, truncated = env.step(np.zeros(3, np.int64))
        rewards.append(reward.copy())
        valid.append(env.valid.copy())
        assert bool(terminated.any()) == (max_steps is None and reward[0] == n)
        assert bool(truncated.any()) == (max_steps is not None and reward[0] == n)
    # every episode returns 1 + 2 + ... + n; reset steps give reward 0 and are not valid
    assert env.drain_episodes() == [(n * (n + 1) / 2, n)] * 12
    assert np.all(np.array(rewards)[~np.array(valid)] == 0)
    assert env.env_steps == int(np.array(valid).sum()) == 12 * n
    assert env.mean_return() == pytest.approx(n * (n + 1) / 2)


def test_cartpole_vector_env_bookkeeping_and_seeding() -> None:
    env = VectorEnv("CartPole-v1", num_envs=4, seed=5, max_episode_steps=30)
    assert env.vectorization == "vector_entry_point"
    obs = env.reset()
    first = obs.copy()
    rng = np.random.default_rng(0)
    total_valid_reward = 0.0
    partial = np.zeros(4)
    for _ in range(300):
        obs, reward, terminated, truncated = env.step(rng.integers(0, 2, 4))
        total_valid_reward += reward[env.valid].sum()
        partial += reward
        partial[terminated | truncated] = 0.0
    episodes = env.drain_episodes()
    assert len(episodes) > 10
    assert all(ret == length and 0 < length <= 30 for ret, length in episodes)
    assert sum(ret for ret, _ in episodes) + partial.sum() == pytest.approx(total_valid_reward)
    again = VectorEnv("CartPole-v1", num_envs=4, seed=5).reset()
    np.testing.assert_array_equal(again, first)
    assert not np.array_equal(VectorEnv("CartPole-v1", num_envs=4, seed=6).reset(), first)


def test_buffer_marks_reset_steps_invalid_across_rollouts() -> None:
    buf = RolloutBuffer(2, 2, (1,))
    zeros = np.zeros(2, np.float32)
    done = np.array([False, True])
    buf.insert(np.zeros((2, 1)), np.zeros(2), zeros, zeros, done, zeros, zeros)
    buf.insert(np.zeros((2, 1)), np.zeros(2), zeros, done, zeros, zeros, zeros)
    np.testing.assert_array_equal(buf.rollout().valid, [[1, 1], [1, 0]])
    buf.insert(np.zeros((2, 1)), np.zeros(2), zeros, zeros, zeros, zeros, zeros)
    assert buf.pos == 1
    with pytest.raises(RuntimeError):
        buf.rollout()
    buf.insert(np.zeros((2, 1)), np.zeros(2), zeros, zeros, zeros, zeros, zeros)
    np.testing.assert_array_equal(buf.rollout().valid, [[1, 0], [1, 1]])


# --- PPO -----------------------------------------------------------------------------


def make_ppo(seed: int, num_envs: int, n_steps: int, config: PPOConfig, env_id: str = "CartPole-v1"):
    env = VectorEnv(env_id, num_envs, seed=seed)
    obs_shape = env.observation_space.shape
    spec = ActionSpec.from_space(env.action_space)
    net = {"kind": "mlp", "hidden": [64, 64], "activation": "tanh"}
    policy = Policy(build_network(net, obs_shape, spec.num_outputs, 0.01, seed=seed), spec, seed=seed)
    value = Value(build_network(net, obs_shape, 1, 1.0, seed=seed + 1))
    learner = PPOLearner(policy, value, config, n_steps, num_envs, obs_shape, seed=seed)
    act = make_act_and_value(policy, value, obs_shape)
    buffer = RolloutBuffer(n_steps, num_envs, obs_shape, (*spec.shape,), spec.np_dtype)
    return env, learner, act, buffer


def run_ppo(env, learner, act, buffer, total_steps: int, stop_return: float | None = None):
    obs = env.reset()
    steps, metrics = 0, {}
    while steps < total_steps:
        for _ in range(buffer.length):
            action, logp, value = act(obs)
            next_obs, reward, terminated, truncated = env.step(action)
            buffer.insert(obs, action, reward, terminated, truncated, logp, value)
            obs = next_obs
        steps += buffer.length * buffer.num_envs
        metrics = learner.update(buffer, obs, steps / total_steps)
        full = len(env.episode_returns) == env.episode_returns.maxlen
        if stop_return is not None and full and env.mean_return() >= stop_return:
            break
    return steps, metrics


def test_update_metrics_explained_variance_counts_only_valid_rows() -> None:
    rng = np.random.default_rng(0)
    returns = rng.normal(size=64).astype(np.float32)
    valid = np.ones(64, np.float32)
    valid[::4] = 0.0  # reset rows: their values are anything
    noisy = returns + 0.5 * rng.normal(size=64).astype(np.float32)
    noisy[::4] = 1e6
    totals, lr, clip = tf.constant([2.0, 4.0]), tf.constant(3e-4), tf.constant(0.1)

    def explained(values: np.ndarray) -> float:
        out = update_metrics(totals, 2, tf.constant(returns), tf.constant(values), tf.constant(valid), lr, clip)
        np.testing.assert_allclose(out.numpy()[[0, 1, 3, 4]], [1.0, 2.0, 3e-4, 0.1], rtol=1e-6)
        return float(out[2])

    on = valid > 0
    err = (returns - noisy)[on]
    assert explained(noisy) == pytest.approx(1.0 - err.var() / returns[on].var(), rel=1e-4)
    assert explained(np.where(on, returns, -1e6).astype(np.float32)) == pytest.approx(1.0)
    assert explained(np.full(64, returns[on].mean(), np.float32)) == pytest.approx(0.0, abs=1e-5)
    assert math.isnan(float(update_metrics(totals, 2, tf.ones([4]), tf.zeros([4]), tf.ones([4]), lr, clip)[2]))


def test_ppo_is_deterministic_for_a_seed() -> None:
    config = PPOConfig(epochs=2, minibatch=48)  # 3 minibatches of 48 out of 128: padding path

    def params(seed: int) -> list[np.ndarray]:
        env, learner, act, buffer = make_ppo(seed, 4, 32, config)
        run_ppo(env, learner, act, buffer, 3 * 128)
        return [v.numpy() for v in learner.params]

    a, b, c = params(7), params(7), params(8)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, z) for x, z in zip(a, c, strict=True))


def test_ppo_ignores_reset_rows_and_works_for_gaussian_actions() -> None:
    config = PPOConfig(epochs=3, minibatch=64)
    env, learner, act, buffer = make_ppo(0, 4, 32, config, env_id="Pendulum-v1")
    assert learner.policy.kind == "gaussian"
    _, metrics = run_ppo(env, learner, act, buffer, 128)
    assert all(np.isfinite(v) for k, v in metrics.items() if k != "explained_variance")
    # same learner state, rollout with junk in reset rows -> identical update
    rollout = buffer.rollout()
    obs_last = np.zeros((4, 3), np.float32)
    valid, truncated = rollout.valid.copy(), rollout.truncated.copy()
    truncated[4, 1] = truncated[19, 3] = 1.0  # episode ends, so the next rows are reset rows
    valid[5, 1] = valid[20, 3] = 0.0
    clean = rollout._replace(valid=valid, truncated=truncated)
    junk = clean._replace(
        obs=np.where(valid[..., None] == 0, 99.0, rollout.obs).astype(np.float32),
        rewards=np.where(valid == 0, -50.0, rollout.rewards).astype(np.float32),
    )
    state = [*learner.variables, learner.generator.state]  # the shuffle too
    snapshot = [v.numpy() for v in state]
    results = []
    for data in (clean, junk):
        for var, val in zip(state, snapshot, strict=True):
            var.assign(val)
        learner.update(data, obs_last, 0.5)
        results.append([v.numpy() for v in learner.params])
    for x, y in zip(*results, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_ppo_learns_cartpole() -> None:
    """RL Zoo settings; random play scores about 22."""
    config = PPOConfig(
        lr=Linear(1e-3, 0.0),
        clip=Linear(0.2, 0.0),
        gamma=0.98,
        gae_lambda=0.8,
        epochs=20,
        minibatch=256,
    )
    env, learner, act, buffer = make_ppo(0, 8, 32, config)
    steps, _ = run_ppo(env, learner, act, buffer, 60_000, stop_return=200.0)
    assert env.mean_return() >= 200.0, (steps, env.mean_return())
    assert len(env.episode_returns) == 100


def test_gradient_reducer_hook_and_checkpoint_roundtrip(tmp_path) -> None:
    config = PPOConfig(epochs=2, minibatch=64)
    env, learner, act, buffer = make_ppo(3, 4, 16, config)
    run_ppo(env, learner, act, buffer, 64)
    rollout, last_obs = buffer.rollout(), np.zeros((4, 4), np.float32)
    # a reducer that zeroes every gradient (as if the other ranks cancelled it out)
    zero = PPOLearner(
        learner.policy,
        learner.value,
        config,
        16,
        4,
        (4,),
        reduce_gradients=lambda grads: [tf.zeros_like(g) for g in grads],
    )
    before = [v.numpy() for v in learner.params]
    zero.update(rollout, last_obs, 0.5)
    for x, v in zip(before, learner.params, strict=True):
        np.testing.assert_array_equal(x, v.numpy())
    # checkpoint: restoring the saved state reproduces the same update exactly
    ckpt = tf.train.Checkpoint(learner=learner)
    path = ckpt.save(str(tmp_path / "ckpt"))
    learner.update(rollout, last_obs, 0.5)
    first = [v.numpy() for v in learner.params]
    assert any(not np.array_equal(x, y) for x, y in zip(before, first, strict=True))
    ckpt.restore(path).assert_consumed()
    learner.update(rollout, last_obs, 0.5)
    for x, v in zip(first, learner.params, strict=True):
        np.testing.assert_array_equal(x, v.numpy())


def _vtrace_reference(rewards, values, next_values, terminated, dones, log_rhos, gamma, lam, rho_bar, c_bar):
    """V-trace by the paper's sum (Espeholt et al. 2018, eq. 1), episode ends cutting the traces."""
    t_len, n_env = rewards.shape
    rho = np.minimum(rho_bar, np.exp(log_rhos))
    c = lam * np.minimum(c_bar, np.exp(log_rhos))
    delta = rho * (rewards + gamma * next_values * (1 - terminated) - values)
    vs = np.zeros_like(values)
    for e in range(n_env):
        for s in range(t_len):
            total, trace = 0.0, 1.0
            for t in range(s, t_len):
                total += gamma ** (t - s) * trace * delta[t, e]
                if dones[t, e]:
                    break
                trace *= c[t, e]
            vs[s, e] = values[s, e] + total
    next_vs = np.where(dones > 0, next_values, np.concatenate([vs[1:], next_values[-1:]], 0))
    return vs, rho * (rewards + gamma * next_vs * (1 - terminated) - values)


def test_vtrace_matches_the_papers_sum_and_is_gae_on_policy() -> None:
    rng = np.random.default_rng(2)
    t_len, n_env, gamma, lam = 23, 4, 0.98, 0.9
    rewards = rng.normal(size=(t_len, n_env)).astype(np.float32)
    values = rng.normal(size=(t_len, n_env)).astype(np.float32)
    last = rng.normal(size=n_env).astype(np.float32)
    next_values = np.concatenate([values[1:], last[None]], 0)
    terminated = (rng.random((t_len, n_env)) < 0.1).astype(np.float32)
    truncated = ((rng.random((t_len, n_env)) < 0.1) & (terminated == 0)).astype(np.float32)
    dones = np.maximum(terminated, truncated)
    log_rhos = rng.normal(scale=0.5, size=(t_len, n_env)).astype(np.float32)
    args = [tf.constant(x) for x in (rewards, values, next_values, terminated, dones, log_rhos)]
    vs, adv = vtrace(*args, gamma, lam, 1.0, 0.9)
    want_vs, want_adv = _vtrace_reference(
        rewards, values, next_values, terminated, dones, log_rhos, gamma, lam, 1.0, 0.9
    )
    np.testing.assert_allclose(vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adv.numpy(), want_adv, rtol=1e-4, atol=1e-4)
    # on-policy the targets are GAE(lambda)'s returns
    on, _ = vtrace(*args[:5], tf.zeros_like(args[5]), gamma, lam, 1.0, 1.0)
    returns = gae(*[tf.constant(x) for x in (rewards, values, next_values, terminated, dones)], gamma, lam) + values
    np.testing.assert_allclose(on.numpy(), returns.numpy(), rtol=1e-4, atol=1e-4)


def test_ppo_with_vtrace_targets_learns_cartpole() -> None:
    """The same RL Zoo settings with V-trace targets and advantages instead of GAE."""
    config = PPOConfig(
        lr=Linear(1e-3, 0.0), clip=Linear(0.2, 0.0), gamma=0.98, gae_lambda=0.8, epochs=20, minibatch=256
    )
    config.correction = "vtrace"
    env, learner, act, buffer = make_ppo(0, 8, 32, config)
    steps, _ = run_ppo(env, learner, act, buffer, 60_000, stop_return=200.0)
    assert env.mean_return() >= 200.0, (steps, env.mean_return())


def test_a2c_with_vtrace_takes_impalas_gradient_at_the_current_policy() -> None:
    """Behaviour log-probabilities below the current ones by 0.2-1.0 clip every rho and c to 1,
    so V-trace's targets and advantages are the on-policy ones: IMPALA's gradient (grad log pi
    times the advantage) is then the on-policy update's. Weighting it by the ratio against the
    behaviour policy as well would scale each sample by e^0.2-e^1.0."""
    from rlgen.algorithms.a2c.config import A2CConfig
    from rlgen.algorithms.a2c.learner import A2CLearner
    from rlgen.runtime.buffers import Rollout

    t_len, n_env, rng = 8, 4, np.random.default_rng(5)
    obs = rng.standard_normal((t_len, n_env, 4)).astype(np.float32)
    actions = rng.integers(0, 2, (t_len, n_env)).astype(np.int32)
    rewards = rng.standard_normal((t_len, n_env)).astype(np.float32)
    zeros, ones = np.zeros((t_len, n_env), np.float32), np.ones((t_len, n_env), np.float32)
    last = rng.standard_normal((n_env, 4)).astype(np.float32)
    optimizer = {"kind": "rmsprop", "alpha": 0.99, "eps": 1e-5, "tf_like": True}  # a step nearly linear in g
    results = []
    for lag in (0.0, 1.0):
        pi = Policy(MLP((4,), [16], 2, output_gain=0.01, seed=1), ActionSpec(n=2))
        v = Value(MLP((4,), [16], 1, seed=2))
        learner = A2CLearner(
            pi, v, A2CConfig(correction="vtrace", optimizer=optimizer, lr=0.01), t_len, n_env, obs_shape=(4,)
        )
        flat = obs.reshape(-1, 4)
        logp = (
            pi.distribution(tf.constant(flat)).log_prob(tf.constant(actions.reshape(-1))).numpy().reshape(t_len, n_env)
        )
        values = v.value(tf.constant(flat)).numpy().reshape(t_len, n_env)
        behaviour = logp - lag * rng.uniform(0.2, 1.0, logp.shape).astype(np.float32)
        learner.update(Rollout(obs, actions, rewards, zeros, zeros, ones, behaviour, values), last)
        results.append([x.numpy() for x in (*pi.trainable_variables, *v.trainable_variables)])
    initial = Policy(MLP((4,), [16], 2, output_gain=0.01, seed=1), ActionSpec(n=2)).trainable_variables
    assert not np.allclose(results[0][0], initial[0].numpy())  # it learned something
    for on_policy, lagged in zip(*results, strict=True):
        np.testing.assert_allclose(lagged, on_policy, rtol=1e-4, atol=1e-6)
