"""One network per agent (``env.agents: {share: false}``): the MLP ensemble against single
networks, the learners' block shuffles, validation, the build, and runs of the built code."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from rlgen.api import build_file, validate_text

from conftest import ROOT

tf = pytest.importorskip("tensorflow")

from rlgen.algorithms.mappo.config import MAPPOConfig  # noqa: E402
from rlgen.algorithms.mappo.learner import MAPPOLearner  # noqa: E402
from rlgen.algorithms.ppo.config import PPOConfig  # noqa: E402
from rlgen.algorithms.ppo.learner import PPOLearner  # noqa: E402
from rlgen.runtime.networks import MLP, agent_seed, build_network  # noqa: E402
from rlgen.runtime.policies import ActionSpec, Policy, Value  # noqa: E402

N = 3


def _np_forward(weights: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, layer_norm=None) -> np.ndarray:
    """A tanh MLP in NumPy: hidden ``(w, b)`` pairs, then the head's; ``layer_norm``: the
    ``(gamma, beta)`` of the input and of each hidden layer."""

    def norm(h, gb):
        mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        return (h - mean) / np.sqrt(var + 1e-5) * gb[0] + gb[1]

    h = x.astype(np.float64)
    if layer_norm:
        h = norm(h, layer_norm[0])
    for i, (w, b) in enumerate(weights[:-1]):
        h = np.tanh(h @ w + b)
        if layer_norm:
            h = norm(h, layer_norm[i + 1])
    w, b = weights[-1]
    return h @ w + b


@pytest.mark.parametrize("layer_norm", [False, True])
def test_member_i_is_a_single_mlp_with_agent_i_weights(layer_norm):
    net = MLP((4,), (8, 8), (5, 1), output_gain=(0.01, 1.0), seed=7, agents=N, layer_norm=layer_norm)
    rng = np.random.default_rng(0)
    # make the biases and norms non-trivial, so that a mixed-up member would show
    for v in net.trainable_variables:
        v.assign(v + rng.normal(0, 0.1, v.shape).astype(np.float32))
    x = rng.standard_normal((6 * N, 4)).astype(np.float32)  # 6 env copies, env-major rows
    out = net(x).numpy()
    assert out.shape == (6 * N, 6)
    layers = [*net.hidden, net.head]
    for i in range(N):
        weights = [(layer.w.numpy()[i], layer.b.numpy()[i]) for layer in layers]
        norms = [(n.gamma.numpy()[i], n.beta.numpy()[i]) for n in (net.input_norm, *net.norms)] if layer_norm else None
        np.testing.assert_allclose(out[i::N], _np_forward(weights, x[i::N], norms), rtol=1e-4, atol=1e-5)
    feats = net.features(x).numpy()
    assert feats.shape == (6 * N, net.feature_size)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_members_start_as_single_networks_with_their_own_seeds(layer_norm):
    net = MLP((4,), (8,), 5, seed=11, agents=N, layer_norm=layer_norm)
    again = MLP((4,), (8,), 5, seed=11, agents=N, layer_norm=layer_norm)
    for a, b in zip(net.trainable_variables, again.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # deterministic
    singles = [MLP((4,), (8,), 5, seed=agent_seed(11, i), layer_norm=layer_norm) for i in range(N)]
    for i, single in enumerate(singles):
        np.testing.assert_array_equal(net.hidden[0].w.numpy()[i], single.hidden[0].w.numpy())
        np.testing.assert_array_equal(net.head.w.numpy()[i], single.head.w.numpy())
    shared = MLP((4,), (8,), 5, seed=11, layer_norm=layer_norm)
    np.testing.assert_array_equal(net.hidden[0].w.numpy()[0], shared.hidden[0].w.numpy())  # member 0
    w = net.hidden[0].w.numpy()
    assert not np.allclose(w[0], w[1]) and not np.allclose(w[1], w[2])  # independent members
    # the same input on every agent's row gives each agent's own output
    x = np.tile(np.array([[0.3, -0.5, 1.2, 0.1]], np.float32), (N, 1))
    out = net(x).numpy()
    assert not np.allclose(out[0], out[1])
    for i, single in enumerate(singles):
        np.testing.assert_allclose(out[i], single(x[:1]).numpy()[0], rtol=1e-5, atol=1e-6)


def test_build_network_makes_ensembles_of_mlps_and_refuses_custom_ones():
    net = build_network({"kind": "mlp", "hidden": [16]}, (4,), 5, seed=3, agents=N)
    assert net.agents == N and tuple(net.head.w.shape) == (N, 16, 5)
    assert build_network({"kind": "mlp", "hidden": [16]}, (4,), 5, seed=3).agents is None
    with pytest.raises(ValueError, match="once per agent"):
        build_network({"kind": "custom", "impl": "rlgen.runtime.networks:mlp"}, (4,), 5, agents=N)


def _ppo(cls, config, agent_block=1, steps=4, copies=4):
    policy = Policy(MLP((4,), (8,), 5, agents=N if agent_block > 1 else None), ActionSpec(n=5))
    value = Value(MLP((4,), (8,), 1, agents=N if agent_block > 1 else None))
    kwargs = {} if agent_block == 1 else {"agent_block": agent_block}
    return cls(policy, value, config, steps, copies * N, (4,), seed=5, **kwargs)


@pytest.mark.parametrize("cls,config", [(PPOLearner, PPOConfig), (MAPPOLearner, MAPPOConfig)])
def test_block_shuffles_keep_each_env_copy_whole_and_in_order(cls, config):
    learner = _ppo(cls, config(minibatch=9 * N, epochs=3), agent_block=N, steps=5)  # 60 rows, 20 blocks
    n = 5 * 4 * N
    index, weight = (t.numpy() for t in learner._minibatch_indices(n))
    assert index.shape == (3 * 3, 9 * N)  # 3 minibatches per epoch, the last padded
    for row in index:
        blocks = row.reshape(-1, N)
        assert (blocks[:, 0] % N == 0).all() and (blocks - blocks[:, :1] == np.arange(N)).all()
    for e in range(3):
        real = index[3 * e : 3 * e + 3].ravel()[weight[3 * e : 3 * e + 3].ravel() > 0]
        assert sorted(real) == list(range(n))  # each epoch: every row once
    assert len({tuple(index[3 * e].tolist()) for e in range(3)}) == 3  # a fresh permutation per epoch


@pytest.mark.parametrize("cls,config", [(PPOLearner, PPOConfig), (MAPPOLearner, MAPPOConfig)])
def test_block_one_shuffles_rows_as_before(cls, config):
    """agent_block=1 (the default) draws exactly the permutation a learner without it draws."""
    a = _ppo(cls, config(minibatch=8, epochs=2))
    b = _ppo(cls, config(minibatch=8, epochs=2))
    b.agent_block = 1
    n = 4 * 4 * N
    ia, wa = a._minibatch_indices(n)
    ib, wb = PPOLearner._minibatch_indices(b, n)
    np.testing.assert_array_equal(ia.numpy(), ib.numpy())
    np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    # the draws are the row permutations of the learner's generator, as before agent blocks
    gen = tf.random.Generator.from_seed(5)
    perm = tf.argsort(gen.uniform([2, n]), axis=1, stable=True).numpy()
    np.testing.assert_array_equal(ia.numpy().reshape(2, -1)[:, :n], perm)


def test_learners_refuse_minibatches_of_partial_env_copies():
    with pytest.raises(ValueError, match="multiples of 3"):
        _ppo(PPOLearner, PPOConfig(minibatch=10), agent_block=N)
    with pytest.raises(ValueError, match="multiples of 3"):
        _ppo(MAPPOLearner, MAPPOConfig(minibatch=10), agent_block=N)


def test_a_block_update_trains_each_member_from_its_own_rows():
    """An update with agent blocks runs; every member's weights move, and rows of agent 1 only
    (advantages elsewhere zero) move member 1's policy and no other member's."""
    learner = _ppo(PPOLearner, PPOConfig(minibatch=4 * N, epochs=2, normalize_advantage=False), agent_block=N)
    t, b = 4, 4 * N
    rng = np.random.default_rng(1)
    obs = rng.standard_normal((t, b, 4)).astype(np.float32)
    actions = rng.integers(0, 5, (t, b)).astype(np.int32)
    rewards = np.zeros((t, b), np.float32)
    rewards[:, 1::N] = 1.0  # only agent 1 is rewarded
    zeros, ones = np.zeros((t, b), np.float32), np.ones((t, b), np.float32)
    values = learner.value.value(obs.reshape(-1, 4)).numpy().reshape(t, b)
    logp = learner.policy.distribution(obs.reshape(-1, 4)).log_prob(actions.reshape(-1)).numpy().reshape(t, b)
    before = learner.policy.network.head.w.numpy().copy()
    args = [obs, actions, rewards, zeros, zeros, ones, logp, values, obs[-1], np.float32(0.0)]
    out = learner.update_fn(*map(tf.constant, args)).numpy()
    assert np.isfinite(out).all()
    moved = np.abs(learner.policy.network.head.w.numpy() - before).reshape(N, -1).max(axis=1)
    assert moved[1] > 0  # agent 1's policy learned from its advantages


# --- validation, build and runs ----------------------------------------------------------
pytest.importorskip("mpe2.simple_spread_v3")

EXAMPLES = ROOT / "examples"


def spec_text(minibatch: int | None = None, agents: int = 3, custom: bool = False) -> str:
    """The MAPPO example with one network per agent, 4 env copies and 2 epochs."""
    data = yaml.safe_load((EXAMPLES / "mappo-simple-spread.rl.yaml").read_text())
    data["env"].update(num_envs=4, agents={"share": False})
    data["env"]["kwargs"]["N"] = agents
    data["components"]["learner"].update(epochs=2, minibatch=minibatch)
    if minibatch is None:
        del data["components"]["learner"]["minibatch"]
    if custom:
        data["networks"]["pi"] = {"kind": "custom", "impl": "my_nets:Torso"}
    data["train"].pop("checkpoint", None)
    return yaml.safe_dump(data, sort_keys=False)


def errors(text: str, **overrides) -> list[tuple[str, tuple]]:
    return [(d.code, d.path) for d in validate_text(text, **overrides).diagnostics if d.severity == "error"]


def test_validate_accepts_share_false_and_refuses_what_cannot_be_per_agent():
    assert errors(spec_text()) == []
    assert errors(spec_text(150)) == []
    assert errors(spec_text(100)) == [("E426", ("components", "learner", "minibatch"))]
    assert ("E426", ("networks", "pi", "kind")) in errors(spec_text(custom=True))
    # two agents, two learners: a minibatch of 10 rows gives each learner 5, half an env copy
    assert errors(spec_text(10, agents=2)) == []
    got = errors(spec_text(10, agents=2), policy="multi-learner", workers=2)
    assert got == [("E603", ("components", "learner", "minibatch"))]


def test_build_gives_every_network_one_member_per_agent(tmp_path):
    spec = tmp_path / "spread.rl.yaml"
    spec.write_text(spec_text(150))
    result, built = build_file(spec, tmp_path / "ml", policy="multi-learner", workers=2)
    assert built is not None, result.diagnostics
    plan = json.loads((tmp_path / "ml" / "plan.json").read_text())
    learner = next(f for f in plan["fragments"] if any(c["kind"] == "mappo" for c in f["components"]))
    assert {n["attr"]: n["agents"] for n in learner["networks"]} == {"pi": 3, "v": 3}
    comp = next(c for c in learner["components"] if c["kind"] == "mappo")
    assert comp["options"]["agent_block"] == 3 and comp["options"]["config"]["minibatch"] == 75
    code = (tmp_path / "ml" / "mappo_simple_spread" / f"{learner['name']}.py").read_text()
    assert "AGENTS = 3" in code and code.count("agents=AGENTS,") == 2 and "agent_block=AGENTS," in code


@pytest.mark.parametrize("policy", ["single", "multi-learner"])
def test_share_false_trains_under_single_and_multi_learner(tmp_path, policy):
    from test_marl_run import rlgen, rows

    spec = tmp_path / "spread.rl.yaml"
    spec.write_text(spec_text(150))  # 2 minibatches per learner
    workers = 1 if policy == "single" else 2
    run_dir = tmp_path / "run"
    args = ["run", spec, "--policy", policy, "--workers", workers, "--iterations", 3, "--run-dir", run_dir]
    r = rlgen(*args, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    got = rows(run_dir)
    assert got and got[-1]["env_steps"] == 3 * 25 * 4
    assert got[-1]["episodes"] > 0 and all(math.isfinite(x["value_loss"]) for x in got)
