"""MAPPO / IPPO: the buffer's state field, the reference MAPPO's critic pieces (ValueNorm,
clipped Huber value loss, truncation as termination), layer-normalised MLPs, and a small
multi-agent learning check."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gymnasium import spaces  # noqa: E402

from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig  # noqa: E402
from rlgen.algorithms.mappo.learner import MAPPOLearner, ValueNorm, bootstrap_ends, value_loss  # noqa: E402
from rlgen.algorithms.ppo.learner import gae  # noqa: E402
from rlgen.runtime.buffers import Rollout, RolloutBuffer, StateRollout  # noqa: E402
from rlgen.runtime.graphbuffers import GraphRolloutBuffer  # noqa: E402
from rlgen.runtime.networks import MLP, LayerNorm, build_network  # noqa: E402
from rlgen.runtime.policies import ActionSpec, Policy, Value  # noqa: E402


# --- the buffer's state field ------------------------------------------------------------
def _steps(rng: np.random.Generator, t: int, b: int, obs: int, state: int):
    for i in range(t):
        yield (
            rng.normal(size=(b, obs)).astype(np.float32),
            rng.integers(0, 3, b),
            rng.normal(size=b).astype(np.float32),
            rng.random(b) < 0.2,
            rng.random(b) < 0.1,
            rng.normal(size=b).astype(np.float32),
            rng.normal(size=b).astype(np.float32),
            np.full((b, state), i, np.float32),
        )


def test_a_buffer_without_state_is_unchanged_and_one_with_state_adds_states_last() -> None:
    plain, with_state = RolloutBuffer(4, 3, (2,)), RolloutBuffer(4, 3, (2,), state_shape=(5,))
    for *row, state in _steps(np.random.default_rng(0), 4, 3, 2, 5):
        plain.insert(*row)
        with_state.insert(*row, state)
    a, b = plain.rollout(), with_state.rollout()
    assert type(a) is Rollout and len(a) == 8 and a._fields == Rollout._fields
    assert type(b) is StateRollout and b._fields == (*Rollout._fields, "states")
    for x, y in zip(a, b[:8], strict=True):
        np.testing.assert_array_equal(x, y)
    assert b.states.shape == (4, 3, 5) and b.states.dtype == np.float32
    np.testing.assert_array_equal(b.states[:, 0, 0], [0, 1, 2, 3])
    with pytest.raises(ValueError, match="stores no state"):
        plain.insert(*row, state)
    with pytest.raises(ValueError, match="pass state"):
        with_state.insert(*row)


def test_the_graph_buffer_matches_the_numpy_buffer_with_and_without_state() -> None:
    for state_shape in (None, (5,)):
        host = RolloutBuffer(3, 2, (2,), state_shape=state_shape)
        graph = GraphRolloutBuffer(3, 2, (2,), state_shape=state_shape)
        rows = graph.begin()
        for t, (*row, state) in enumerate(_steps(np.random.default_rng(1), 3, 2, 2, 5)):
            state = None if state_shape is None else state
            host.insert(*row, **({} if state is None else {"state": state}))
            rows = graph.insert(rows, t, *row, **({} if state is None else {"state": state}))
        a, b = host.rollout(), graph.end(rows)
        assert type(a) is type(b) and len(a) == (8 if state_shape is None else 9)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x, y.numpy())


# --- ValueNorm and the value loss ------------------------------------------------------------
class NumpyValueNorm:
    """The reference MAPPO's ValueNorm (onpolicy/utils/valuenorm.py), scalar, in NumPy."""

    def __init__(self, beta: float = 0.99999, epsilon: float = 1e-5) -> None:
        self.beta, self.epsilon = beta, epsilon
        self.mean = self.mean_sq = self.debias = 0.0

    def mean_var(self):
        d = max(self.debias, self.epsilon)
        mean = self.mean / d
        return mean, max(self.mean_sq / d - mean**2, 1e-2)

    def update(self, x):
        x = np.asarray(x, np.float64)
        self.mean = self.mean * self.beta + x.mean() * (1 - self.beta)
        self.mean_sq = self.mean_sq * self.beta + (x**2).mean() * (1 - self.beta)
        self.debias = self.debias * self.beta + (1 - self.beta)

    def normalize(self, x):
        m, v = self.mean_var()
        return (x - m) / np.sqrt(v)

    def denormalize(self, x):
        m, v = self.mean_var()
        return x * np.sqrt(v) + m


def test_value_norm_matches_the_reference() -> None:
    rng = np.random.default_rng(0)
    ours, ref = ValueNorm(), NumpyValueNorm()
    x = np.linspace(-2, 3, 7).astype(np.float32)
    np.testing.assert_allclose(ours.normalize(x).numpy(), ref.normalize(x), rtol=1e-5)  # no data: identity-ish
    for k in range(5):
        batch = rng.normal(10.0 + k, 3.0, size=64).astype(np.float32)
        ours.update(batch)
        ref.update(batch)
        mean, var = (t.numpy() for t in ours.mean_var())
        np.testing.assert_allclose([mean, var], ref.mean_var(), rtol=2e-3)
        np.testing.assert_allclose(ours.normalize(x).numpy(), ref.normalize(x), rtol=2e-3, atol=1e-4)
        np.testing.assert_allclose(ours.denormalize(x).numpy(), ref.denormalize(x), rtol=2e-3, atol=1e-3)
    # weights leave rows out
    a, b = ValueNorm(), ValueNorm()
    a.update(np.array([1.0, 2.0, 100.0], np.float32), np.array([1.0, 1.0, 0.0], np.float32))
    b.update(np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose([t.numpy() for t in a.mean_var()], [t.numpy() for t in b.mean_var()])


def test_the_value_loss_is_the_references_clipped_huber_loss() -> None:
    values = np.array([0.0, 1.0, -3.0, 20.0, 0.5], np.float32)
    old = np.array([0.5, 0.0, 0.0, 0.0, 0.5], np.float32)
    targets = np.array([1.0, 0.0, 10.0, -5.0, 0.4], np.float32)

    def huber(e, d):
        a = np.abs(e)
        return np.where(a <= d, 0.5 * e**2, d * (a - 0.5 * d))

    clipped = old + np.clip(values - old, -0.2, 0.2)
    want = np.maximum(huber(targets - values, 10.0), huber(targets - clipped, 10.0))
    # by hand for the third: unclipped error 13 -> 10 * (13 - 5) = 80; clipped -0.2: 10.2 -> 52
    assert want[2] == pytest.approx(80.0)
    np.testing.assert_allclose(value_loss(values, old, targets, 0.2, 10.0).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(value_loss(values, old, targets, None, 10.0).numpy(), huber(targets - values, 10.0))
    np.testing.assert_allclose(value_loss(values, old, targets, None, None).numpy(), 0.5 * (targets - values) ** 2)
    np.testing.assert_allclose(
        value_loss(values, old, targets, 0.2, None).numpy(),
        np.maximum(0.5 * (targets - values) ** 2, 0.5 * (targets - clipped) ** 2),
    )


def test_time_limit_terminal_stops_the_bootstrap_at_truncation() -> None:
    # one env, three steps: the second is truncated; the value of its final observation is 5
    rewards = tf.constant([[1.0], [1.0], [1.0]])
    values = tf.constant([[2.0], [2.0], [5.0]])  # the third row is the reset row: V(final obs)
    next_values = tf.constant([[2.0], [5.0], [3.0]])
    terminated = tf.zeros([3, 1])
    truncated = tf.constant([[0.0], [1.0], [0.0]])
    dones = tf.maximum(terminated, truncated)
    g, lam = 0.9, 1.0
    boot = gae(rewards, values, next_values, bootstrap_ends(terminated, truncated, "bootstrap"), dones, g, lam)
    term = gae(rewards, values, next_values, bootstrap_ends(terminated, truncated, "terminal"), dones, g, lam)
    np.testing.assert_allclose(boot.numpy()[1], [1.0 + g * 5.0 - 2.0])
    np.testing.assert_allclose(term.numpy()[1], [1.0 - 2.0])
    np.testing.assert_allclose(boot.numpy()[0] - term.numpy()[0], g * lam * g * 5.0, rtol=1e-6)
    np.testing.assert_allclose(boot.numpy()[2], term.numpy()[2])


# --- the learner -------------------------------------------------------------------------------
N_AGENTS, N_ENVS, N_CTX = 2, 8, 3
ROWS, OBS, STATE = N_AGENTS * N_ENVS, N_CTX, N_AGENTS * N_CTX


def make_learner(state: bool, seed: int = 0, steps: int = 8, **config):
    spec = ActionSpec.from_space(spaces.Discrete(N_CTX))
    net = {"kind": "mlp", "hidden": [32], "activation": "tanh", "layer_norm": True}
    policy = Policy(build_network(net, (OBS,), N_CTX, 0.01, seed=seed), spec, seed=seed)
    value = Value(build_network(net, (STATE,) if state else (OBS,), 1, 1.0, seed=seed + 1))
    cfg = MAPPOConfig(**{"jit_compile": False, **config})
    shape = (STATE,) if state else None
    learner = MAPPOLearner(policy, value, cfg, steps, ROWS, (OBS,), seed=seed, state_shape=shape)
    return policy, value, learner


def bandit_obs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each agent sees a one-hot context; the state is the env's agents' observations
    concatenated, replicated on each agent's row (env-major, agent-minor)."""
    ctx = rng.integers(0, N_CTX, ROWS)
    obs = np.eye(N_CTX, dtype=np.float32)[ctx]
    state = np.repeat(obs.reshape(N_ENVS, STATE), N_AGENTS, axis=0)
    return obs, state


def collect(policy, value, buffer, rng, state: bool, steps: int):
    """A rollout of the multi-agent bandit: reward 1 for the action equal to the context."""
    rewards = []
    obs, st = bandit_obs(rng)
    for _ in range(steps):
        action, logp = policy.act(tf.constant(obs))
        v = value.value(tf.constant(st if state else obs))
        reward = (action.numpy() == obs.argmax(1)).astype(np.float32)
        rewards.append(reward.mean())
        flags = np.zeros(ROWS, bool)
        buffer.insert(obs, action.numpy(), reward, flags, flags, logp.numpy(), v.numpy(), *([st] if state else []))
        obs, st = bandit_obs(rng)
    return float(np.mean(rewards)), obs, st


@pytest.mark.parametrize("state", [True, False], ids=["mappo", "ippo"])
def test_mappo_and_ippo_learn_a_multi_agent_bandit(state: bool) -> None:
    steps, updates = 8, 12
    policy, value, learner = make_learner(state, lr=5e-3, gamma=0.5, epochs=5)
    buffer = RolloutBuffer(steps, ROWS, (OBS,), state_shape=(STATE,) if state else None)
    rng = np.random.default_rng(0)
    first, _, _ = collect(policy, value, buffer, rng, state, steps)
    for _ in range(updates):
        _, obs, st = collect(policy, value, buffer, rng, state, steps)
        metrics = learner.update(buffer, obs, st if state else None)
    assert set(metrics) == set(METRICS) and all(np.isfinite(v) for k, v in metrics.items() if k != "")
    final = np.mean([collect(policy, value, buffer, rng, state, steps)[0] for _ in range(3)])
    # chance is 1/3; a dozen updates of 128 samples lift it by more than 0.3, above 0.8 (both reach ~1.0)
    assert first < 0.5 and final > max(first + 0.3, 0.8), (first, final)
    assert learner.value_norm is not None and learner.value_norm.debiasing_term.numpy() > 0


@pytest.mark.parametrize("minibatch", [None, 4 * ROWS], ids=["whole", "halves"])
def test_value_norm_takes_in_every_gradient_steps_returns_as_the_reference(minibatch) -> None:
    """The reference folds each minibatch's returns into ValueNorm before normalising them, at
    every gradient step: E epochs of M minibatches are E*M updates of the debiased average,
    not one per rollout (which weighs the rollout differently within the epochs)."""
    epochs = 3
    config = {"epochs": epochs} if minibatch is None else {"epochs": epochs, "minibatch": minibatch}
    policy, value, learner = make_learner(True, steps=8, **config)
    buffer = RolloutBuffer(8, ROWS, (OBS,), state_shape=(STATE,))
    rng = np.random.default_rng(1)
    _, obs, st = collect(policy, value, buffer, rng, True, 8)
    learner.update(buffer, obs, st)
    updates = epochs * learner.minibatches_per_epoch
    assert learner.minibatches_per_epoch == (1 if minibatch is None else 2)
    beta = learner.value_norm.beta
    np.testing.assert_allclose(learner.value_norm.debiasing_term.numpy(), 1.0 - beta**updates, rtol=1e-4)


def test_update_fn_takes_states_after_values_and_last_state_after_last_obs() -> None:
    _, _, learner = make_learner(True, steps=2)
    inputs = [s.shape.as_list() for s in learner.update_fn.input_signature]
    assert inputs == [
        [2, ROWS, OBS],
        [2, ROWS],
        *([[2, ROWS]] * 6),
        [2, ROWS, STATE],
        [ROWS, OBS],
        [ROWS, STATE],
        [],
    ]
    _, _, ippo = make_learner(False, steps=2)
    assert len(ippo.update_fn.input_signature) == 10  # PPO's
    assert ippo.minibatch == 2 * ROWS  # minibatch null: the whole rollout
    with pytest.raises(ValueError, match="state"):
        ippo.update(RolloutBuffer(2, ROWS, (OBS,), state_shape=(STATE,))._data, np.zeros((ROWS, OBS)))


def test_critic_lr_moves_only_the_value_and_time_limit_changes_the_update() -> None:
    rng = np.random.default_rng(3)
    rollouts = []
    buffer = RolloutBuffer(4, ROWS, (OBS,), state_shape=(STATE,))
    for t in range(4):
        obs, st = bandit_obs(rng)
        flags = np.zeros(ROWS, bool)
        truncated = np.full(ROWS, t == 1)
        buffer.insert(
            obs, rng.integers(0, 3, ROWS), np.ones(ROWS), flags, truncated, np.full(ROWS, -1.1), np.full(ROWS, 0.5), st
        )
    rollouts = buffer.rollout()
    last_obs, last_state = bandit_obs(rng)
    out = {}
    for time_limit in ("bootstrap", "terminal"):
        policy, value, learner = make_learner(
            True, steps=4, lr=1e-9, critic_lr=1e-2, value_norm=False, time_limit=time_limit, epochs=1
        )
        before_pi = [v.numpy().copy() for v in policy.trainable_variables]
        before_v = [v.numpy().copy() for v in value.trainable_variables]
        out[time_limit] = learner.update(rollouts, last_obs, last_state)
        moved_pi = max(np.abs(v.numpy() - b).max() for v, b in zip(policy.trainable_variables, before_pi, strict=True))
        moved_v = max(np.abs(v.numpy() - b).max() for v, b in zip(value.trainable_variables, before_v, strict=True))
        assert moved_pi < 1e-6 < 1e-3 < moved_v
    assert out["bootstrap"]["value_loss"] != pytest.approx(out["terminal"]["value_loss"])


def test_a_shared_network_trains_as_ppo_and_refuses_a_critic_lr() -> None:
    spec = ActionSpec.from_space(spaces.Discrete(N_CTX))
    net = build_network({"kind": "mlp", "hidden": [8]}, (OBS,), (N_CTX, 1), (0.01, 1.0))
    policy, value = Policy(net, spec, outputs=(0, N_CTX)), Value(net, output=N_CTX)
    with pytest.raises(ValueError, match="critic_lr"):
        MAPPOLearner(policy, value, MAPPOConfig(critic_lr=1e-3, jit_compile=False), 2, ROWS, (OBS,))
    learner = MAPPOLearner(policy, value, MAPPOConfig(jit_compile=False), 2, ROWS, (OBS,))
    assert not learner.separate


# --- layer-normalised MLPs -------------------------------------------------------------------
def test_layer_norm_adds_normalisation_and_leaves_the_dense_weights_as_drawn() -> None:
    plain = MLP((4,), (16, 8), 3, seed=7)
    normed = build_network({"kind": "mlp", "hidden": [16, 8], "layer_norm": True}, (4,), 3, 1.0, seed=7)
    assert not plain.layer_norm and not any("norm" in v.name for v in plain.trainable_variables)
    assert len(plain.trainable_variables) == 6
    assert isinstance(normed.input_norm, LayerNorm) and [n.gamma.shape[0] for n in normed.norms] == [16, 8]
    assert len(normed.trainable_variables) == 6 + 2 * 3
    for a, b in zip((*plain.hidden, plain.head), (*normed.hidden, normed.head), strict=True):
        np.testing.assert_array_equal(a.w.numpy(), b.w.numpy())
    x = np.random.default_rng(0).normal(3.0, 5.0, (5, 4)).astype(np.float32)
    h = normed.input_norm(x).numpy()  # torch.nn.LayerNorm: biased variance, eps 1e-5
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(h, want, rtol=1e-4, atol=1e-5)
    h = want
    for layer in normed.hidden:
        a = np.tanh(h @ layer.w.numpy() + layer.b.numpy())
        h = (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(normed(x).numpy(), h @ normed.head.w.numpy(), rtol=1e-4, atol=1e-5)


def test_an_mlp_without_layer_norm_draws_todays_weights() -> None:
    """Pinned: the first weights of a seeded default MLP (as before layer_norm existed)."""
    net = build_network({"kind": "mlp", "hidden": [4]}, (3,), 2, 0.01, seed=11)
    again = MLP((3,), (4,), 2, output_gain=0.01, seed=11, layer_norm=False)
    rng = np.random.default_rng(11)
    from rlgen.runtime.networks import orthogonal

    w0 = orthogonal(3, 4, np.sqrt(2.0), rng)
    w1 = orthogonal(4, 2, 0.01, rng)
    for got in (net, again):
        np.testing.assert_array_equal(got.hidden[0].w.numpy(), w0)
        np.testing.assert_array_equal(got.head.w.numpy(), w1)
        assert [v.name for v in got.trainable_variables] == [v.name for v in MLP((3,), (4,), 2).trainable_variables]


# --- the TF-free half --------------------------------------------------------------------------
def test_the_mappo_home_imports_without_tensorflow() -> None:
    code = (
        "import sys, rlgen.algorithms.mappo, rlgen.algorithms.mappo.config, rlgen.algorithms.ippo\n"
        "from rlgen.algorithms import ALGORITHMS\n"
        "assert ALGORITHMS['mappo'].config is ALGORITHMS['ippo'].config\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_defaults_are_the_reference_mappos() -> None:
    cfg = MAPPOConfig()
    want = {
        "lr": 7e-4,
        "epochs": 10,
        "minibatch": None,
        "clip": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 1.0,
        "max_grad_norm": 10.0,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "normalize_advantage": True,
        "critic_lr": None,
        "value_norm": True,
        "huber_delta": 10.0,
        "clip_value": 0.2,
        "time_limit": "bootstrap",
        "optimizer": {"kind": "adam", "eps": 1e-5},
    }
    assert {k: v for k, v in dataclasses.asdict(cfg).items() if k in want} == want
