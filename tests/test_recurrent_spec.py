"""Recurrent networks in the language (`networks.<n>.recurrent`): the envs' `first` output, the
carried states matched to their networks by the calls that read them, the checks (E437-E439),
the example trained, exported and evaluated on both env backends, and under every distribution
policy the update recomputing exactly what the actors acted with."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlgen.api import build_file, validate_text
from rlgen.dsl.resolved import resolved

pytest.importorskip("mpe2.simple_spread_v3")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rmappo-simple-spread.rl.yaml"
TEXT = EXAMPLE.read_text()
INSERT = "buffer.insert(obs, action, reward, terminated, truncated, logp, value, state, first, h, hv)"
UPDATE = "learner.update(buffer, obs, state, hv)"


def codes(text: str) -> list[str]:
    return sorted(d.code for d in validate_text(text).diagnostics if d.severity.name == "ERROR")


def built(tmp_path: Path, text: str) -> str:
    spec = tmp_path / "spec.rl.yaml"
    spec.write_text(text.replace("num_envs: 128 ", "backend: tensorflow\n  num_envs: 4  "))
    out = tmp_path / "build"
    build_file(spec, out)
    return next(out.glob("*/agent.py")).read_text()


# --- the env's `first` ------------------------------------------------------------------------
# With max_cycles 3, steps 1-3 are an episode and step 4 its reset step: the row after it begins
# the next episode, so `first` is true after steps 4 and 8 and after reset, and false otherwise.
FIRST_AFTER = [False, False, False, True, False, False, False, True]


def test_host_env_returns_first_after_reset_and_after_each_reset_step():
    from rlgen.runtime.agents import ParallelVectorEnv

    env = ParallelVectorEnv("mpe2.simple_spread_v3", num_envs=2, kwargs={"max_cycles": 3}, state="concat", first=True)
    obs, state, first = env.reset()
    assert first.dtype == bool and first.shape == (6,) and first.all() and state.shape == (6, 54)
    rng = np.random.default_rng(0)
    for want in FIRST_AFTER:
        *_, first = env.step(rng.integers(0, 5, 6))
        assert first.tolist() == [want] * 6
        assert first.tolist() == (~env.valid).tolist()  # the rows whose step was a reset step


def test_in_graph_env_returns_first_as_the_host_env_does():
    from rlgen.runtime.mpe.agent_env import make_tf_agent_env

    env = make_tf_agent_env("mpe2.simple_spread_v3", 2, kwargs={"max_cycles": 3}, first=True)
    obs, first = env.reset()
    assert first.dtype.name == "bool" and bool(first.numpy().all())
    for want in FIRST_AFTER:
        *_, first = env.step(np.zeros(6, np.int32))
        assert first.numpy().tolist() == [want] * 6
    without = make_tf_agent_env("mpe2.simple_spread_v3", 2, kwargs={"max_cycles": 3})
    assert len(without.step(np.zeros(6, np.int32))) == 4  # unchanged without `first`


# --- the language -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "workers"),
    [("single", 1), ("actors-learner", 3), ("async-actors", 3), ("multi-learner", 2), ("central-inference", 3),
     ("pipelined-inference", 3), ("auto", 3)],
)  # fmt: skip
def test_the_example_validates_under_every_policy(policy, workers):
    assert codes(TEXT.replace("policy: single ", f"policy: {policy}\n  workers: {workers} ")) == []


@pytest.mark.parametrize(
    ("change", "code"),
    [
        # a gymnasium env gives no `first`
        (lambda t: t.split("env:")[0] + "env: {id: CartPole-v1}\n\nnetworks:" + t.split("networks:")[1], "E437"),
        # a recurrent critic without its state after the rollout: nothing to bootstrap from
        (lambda t: t.replace(UPDATE, "learner.update(buffer, obs, state)"), "E439"),
        # the policy's state in the critic's place
        (lambda t: t.replace(UPDATE, "learner.update(buffer, obs, state, h)"), "E439"),
        (lambda t: t.replace("    chunk: 10 ", "    correction: vtrace\n    chunk: 10 "), "E439"),
        (
            lambda t: (
                t.replace("kind: mappo ", "kind: ppo\n    minibatch: 3328 ")
                .replace("    time_limit: terminal", "")
                .replace("    chunk: 10 ", "")
            ),
            "E439",
        ),
        # the critic's stored state is missing
        (lambda t: t.replace(INSERT, INSERT.replace(", hv)", ")")), "E438"),
    ],
)
def test_refusals(change, code):
    assert code in codes(change(TEXT))


def test_an_actor_called_without_its_state_is_an_arity_error():
    text = TEXT.replace("actor.act(obs, h, first)", "actor.act(obs)")
    assert "E305" in codes(text)


def test_stored_states_go_to_their_networks_whatever_their_order(tmp_path):
    code = built(tmp_path, TEXT.replace(INSERT, INSERT.replace("first, h, hv)", "first, hv, h)")))
    assert "memory=(first, h, hv)" in code


def test_a_recurrent_policy_beside_a_feed_forward_critic(tmp_path):
    text = TEXT.replace(
        "  v: {kind: mlp, hidden: [64, 64], activation: tanh, layer_norm: true, recurrent: {size: 64}}",
        "  v: {kind: mlp, hidden: [64, 64], activation: tanh, layer_norm: true}",
    )
    text = text.replace("critic.value(state, hv, first) -> value, next_hv", "critic.value(state) -> value")
    text = text.replace("    - critic.initial_state() -> hv\n", "").replace(", hv: next_hv}", "}")
    text = text.replace(INSERT, INSERT.replace(", hv)", ")")).replace(UPDATE, "learner.update(buffer, obs, state)")
    text = text.replace("send: [buffer, obs, state, hv]", "send: [buffer, obs, state]")
    assert codes(text) == []
    code = built(tmp_path, text)
    assert "memory=(first, h, tf.zeros([BATCH, 0]))" in code
    assert "memory=(64, 0)" in code and "tf.zeros([BATCH, 0])," in code  # no value state to bootstrap from


def test_ippo_without_a_state_stores_first_and_states_after_value(tmp_path):
    """IPPO's env has no state: `first` comes right after the rewards' flags, and the buffer
    stores `first` and the states right after `value`."""
    t = (ROOT / "examples" / "ippo-simple-spread.rl.yaml").read_text()
    t = t.replace("layer_norm: true}", "layer_norm: true, recurrent: {size: 32}}")
    t = t.replace("    - env.reset() -> obs\n", "    - env.reset() -> obs, first\n    - actor.initial_state() -> h\n")
    t = t.replace("actor.act(obs) -> action, logp", "actor.act(obs, h, first) -> action, logp, next_h")
    t = t.replace(
        "    - actor.initial_state() -> h\n", "    - actor.initial_state() -> h\n    - critic.initial_state() -> hv\n"
    )
    t = t.replace("critic.value(obs) -> value", "critic.value(obs, hv, first) -> value, next_hv")
    t = t.replace("terminated, truncated\n", "terminated, truncated, next_first\n", 1)
    t = t.replace("logp, value)", "logp, value, first, h, hv)").replace("repeat: 25", "repeat: 26")
    t = t.replace("carry: {obs: next_obs}", "carry: {obs: next_obs, first: next_first, h: next_h, hv: next_hv}")
    t = t.replace("learner.update(buffer, obs) -> metrics", "learner.update(buffer, obs, hv) -> metrics")
    t = t.split("partitions:")[0] + "deploy:" + t.split("deploy:")[1]
    assert codes(t) == []
    code = built(tmp_path, t)
    assert "value, next_hv = self.critic.value_recurrent(obs, hv, first)" in code
    assert "memory=(first, h, hv)" in code and "memory=(32, 32)" in code
    assert "tf.zeros([BATCH]),\n            hv,\n            progress," in code


@pytest.mark.parametrize("output_norm", [True, False])
def test_the_plan_counts_a_recurrent_networks_weights(output_norm):
    """plan.json's weight sizes (what auto's cost model and the messages use) count the GRU."""
    import tensorflow as tf

    from rlgen.api import validate_text as validate
    from rlgen.codegen.context import Context
    from rlgen.codegen.policies import POLICIES
    from rlgen.codegen.weights import network_size
    from rlgen.dsl.envinfo import resolve_spaces
    from rlgen.runtime.networks import build_network

    text = TEXT.replace("recurrent: {size: 64}", f"recurrent: {{size: 48, layer_norm: {str(output_norm).lower()}}}")
    result = validate(text)
    ctx = Context(result.spec, resolve_spaces(result.spec.env)[0], POLICIES["single"])
    for name, inputs, outputs in (("pi", (18,), 5), ("v", (54,), 1)):
        net = build_network(resolved(result.spec)["networks"][name], inputs, outputs)
        assert network_size(ctx, name, outputs) == sum(int(tf.size(v)) for v in net.trainable_variables)


# --- trained, exported, evaluated -------------------------------------------------------------
def run(tmp_path: Path, *extra: str, iterations: int = 3, envs: int = 8) -> list[dict]:
    spec = tmp_path / "rmappo.rl.yaml"
    spec.write_text(TEXT.replace("num_envs: 128 ", f"num_envs: {envs} "))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--run-dir", str(run_dir), "--quiet"]
    cmd += ["--iterations", str(iterations), *extra]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "tensorflow" not in r.stderr.lower()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "mean_return" in row]


@pytest.mark.skipif(not Path(sys.executable).with_name("horovodrun").exists(), reason="needs scripts/setup.sh")
@pytest.mark.parametrize("backend", ["tensorflow", "mpe2"])
def test_trains_exports_and_evaluates_under_single(tmp_path, backend):
    extra = ("--set", "env.backend=tensorflow") if backend == "tensorflow" else ()
    rows = run(tmp_path, *extra)
    assert len(rows) == 3 and all(math.isfinite(r["mean_return"]) for r in rows if r["episodes"])
    assert all(math.isfinite(r["approx_kl"]) and r["approx_kl"] >= 0 for r in rows)
    import tensorflow as tf

    policy = tf.saved_model.load(str(tmp_path / "run" / "policy"))
    state = policy.initial_state(tf.constant(6))
    action, state = policy.act(tf.zeros([6, 18]), state, tf.ones([6], tf.bool))
    assert action.shape == (6,) and state.shape == (6, 64)
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "eval", str(tmp_path / "run"), "--episodes", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert result["episodes"] == 4 and -200 < result["mean_return"] < 0  # negative distances


@pytest.mark.skipif(not Path(sys.executable).with_name("horovodrun").exists(), reason="needs scripts/setup.sh")
def test_learns_in_graph(tmp_path):
    """The example as written (128 env copies), in-graph, 40 iterations (133k joint steps, about
    45 s here): the mean agent return rises from a random policy's (about -26 on mpe2's reward)
    by more than 3.5 (it reached -19.2 against -26.3 when written; iterations differ by about 1)."""
    spec = tmp_path / "rmappo.rl.yaml"
    spec.write_text(TEXT)
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--run-dir", str(tmp_path / "run"), "--quiet"]
    cmd += ["--iterations", "40", "--set", "env.backend=tensorflow"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    returns = [row["mean_return"] for row in rows if "mean_return" in row]
    assert len(returns) == 40
    assert np.mean(returns[-5:]) > np.mean(returns[:3]) + 3.5, returns


@pytest.mark.skipif(not Path(sys.executable).with_name("horovodrun").exists(), reason="needs scripts/setup.sh")
@pytest.mark.parametrize(
    ("policy", "workers"),
    [("actors-learner", 3), ("async-actors", 3), ("multi-learner", 2), ("central-inference", 3),
     ("pipelined-inference", 3)],
)  # fmt: skip
def test_every_policy_stores_the_states_it_acted_from(tmp_path, policy, workers):
    """At a learning rate of 1e-12 the weights do not move, so the update's recomputation of the
    stored chunks, each unrolled from its stored state with `first` applied, must give back the
    log-probabilities the actors acted with: approx_kl 0 (float noise) and no clipping, on every
    rank's rows. A state sent, stored, split by env group (pipelined-inference acts for one group
    from that group's own state) or restarted wrongly breaks it."""
    rows = run(
        tmp_path, "--policy", policy, "--workers", str(workers), "--set", "components.learner.lr=1e-12",
        iterations=2, envs=12,
    )  # fmt: skip
    assert len(rows) == 2
    for row in rows:
        assert row["approx_kl"] < 1e-9 and row["clip_fraction"] == 0.0, row
