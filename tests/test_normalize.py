"""Observation and reward normalisation (``env.normalize``): the running statistics against
NumPy, the host and in-graph paths against each other and against SB3's VecNormalize rules,
the spec's defaults and resolved form, and (end to end, real processes) checkpoints, the
exported policy, raw reported returns and statistics equal on every multi-learner rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlgen.api import validate_file, validate_text
from rlgen.dsl.resolved import plain, resolved
from rlgen.dsl.spec import Normalize

from conftest import ROOT

SCHEMA = json.loads((ROOT / "schemas" / "rlgen.schema.json").read_text())
HOROVOD = Path(sys.executable).with_name("horovodrun").exists()

SPEC = """\
rlgen: 1
name: normtest
env: {id: Pendulum-v1, num_envs: 4, normalize: NORMALIZE}
networks:
  pi: {kind: mlp, hidden: [32, 32], activation: tanh}
  v: {kind: mlp, hidden: [32, 32], activation: tanh}
components:
  actor: {kind: policy, network: pi}
  critic: {kind: value, network: v}
  buffer: {kind: rollout}
  learner: {kind: ppo, policy: actor, value: critic, gamma: 0.9, minibatch: 64, epochs: 2}
loop:
  init:
    - env.reset() -> obs
  rollout:
    repeat: REPEAT
    do:
      - actor.act(obs) -> action, logp
      - critic.value(obs) -> value
      - env.step(action) -> next_obs, reward, terminated, truncated
      - buffer.insert(obs, action, reward, terminated, truncated, logp, value)
    carry: {obs: next_obs}
  learn:
    - learner.update(buffer, obs) -> metrics
partitions:
  rollout: {after: rollout, send: [buffer, obs], receive: [weights]}
  gradients: {at: learner.update, reduce: [gradients]}
deploy: {policy: single}
train: {total_steps: 100000, stop: {mean_return: 0}, checkpoint: {every: 0}}
"""


def spec_text(normalize: str = "true", repeat: int = 32) -> str:
    return SPEC.replace("NORMALIZE", normalize).replace("REPEAT", str(repeat))


# --- the statistics --------------------------------------------------------------------
def test_running_mean_std_matches_numpy_including_the_merge_of_two_halves():
    from rlgen.runtime.normalize import RunningMeanStd, merge_moments

    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(600, 5)) * rng.uniform(0.1, 10.0, size=5)
    first, second = RunningMeanStd((5,), count=0.0), RunningMeanStd((5,), count=0.0)
    for batch in np.split(data[:300], 6):
        first.update(batch)
    for batch in np.split(data[300:], 10):
        second.update(batch)
    np.testing.assert_allclose(first.mean.numpy(), data[:300].mean(0), rtol=1e-10)
    np.testing.assert_allclose(first.var.numpy(), data[:300].var(0), rtol=1e-10)
    first.merge(second.count, second.mean, second.var)  # the parallel algorithm
    assert first.count.numpy() == 600
    np.testing.assert_allclose(first.mean.numpy(), data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(first.var.numpy(), data.var(0), rtol=1e-10)
    n, mean, var = merge_moments(
        (300.0, data[:300].mean(0), data[:300].var(0)), (300.0, data[300:].mean(0), data[300:].var(0))
    )
    np.testing.assert_allclose(mean, data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(var, data.var(0), rtol=1e-10)
    # SB3's prior (count 1e-4, mean 0, var 1) weighs almost nothing
    sb3 = RunningMeanStd((5,))
    sb3.update(data)
    np.testing.assert_allclose(sb3.mean.numpy(), data.mean(0), rtol=1e-5)


def vec_normalize_reference(obs_seq, rew_seq, done_seq, gamma, eps=1e-8, clip=10.0):
    """SB3 VecNormalize.step_wait, written out in NumPy (count starts at 1e-4)."""
    o = [1e-4, np.zeros(obs_seq[0].shape[1:]), np.ones(obs_seq[0].shape[1:])]
    r = [1e-4, 0.0, 1.0]
    returns = np.zeros(obs_seq[0].shape[0])

    def update(stats, x):
        n, mean, var = stats
        bm, bv, bn = x.mean(0), x.var(0), x.shape[0]
        delta, tot = bm - mean, n + bn
        m2 = var * n + bv * bn + delta**2 * n * bn / tot
        stats[:] = [tot, mean + delta * bn / tot, m2 / tot]

    out = []
    update(o, obs_seq[0])
    out.append((np.clip((obs_seq[0] - o[1]) / np.sqrt(o[2] + eps), -clip, clip), None))
    for obs, rew, done in zip(obs_seq[1:], rew_seq, done_seq, strict=True):
        update(o, obs)
        returns = returns * gamma + rew
        update(r, returns)
        n_rew = np.clip(rew / np.sqrt(r[2] + eps), -clip, clip)
        returns[done] = 0.0
        out.append((np.clip((obs - o[1]) / np.sqrt(o[2] + eps), -clip, clip), n_rew))
    return out


def random_steps(steps=40, envs=3, seed=1):
    rng = np.random.default_rng(seed)
    obs = [rng.normal(5.0, 3.0, (envs, 4)).astype(np.float32) for _ in range(steps + 1)]
    rew = [rng.normal(1.0, 2.0, envs).astype(np.float32) for _ in range(steps)]
    term = [rng.random(envs) < 0.05 for _ in range(steps)]
    trunc = [rng.random(envs) < 0.05 for _ in range(steps)]
    return obs, rew, term, trunc


def test_host_and_graph_normalisation_agree_with_vec_normalize():
    import tensorflow as tf

    from rlgen.runtime.normalize import Normalizer

    obs, rew, term, trunc = random_steps()
    ref = vec_normalize_reference(obs, rew, [a | b for a, b in zip(term, trunc, strict=True)], 0.9)
    host, graph = Normalizer((4,), 3, gamma=0.9), Normalizer((4,), 3, gamma=0.9)
    np.testing.assert_allclose(host.reset(obs[0]), ref[0][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(graph.observe_reset(tf.constant(obs[0])).numpy(), ref[0][0], rtol=1e-5, atol=1e-5)
    for t in range(len(rew)):
        h_obs, h_rew = host.step(obs[t + 1], rew[t], term[t], trunc[t])
        g_obs, g_rew = graph.observe_step(*(tf.constant(x) for x in (obs[t + 1], rew[t], term[t], trunc[t])))
        for got in ((h_obs, h_rew), (g_obs.numpy(), g_rew.numpy())):
            np.testing.assert_allclose(got[0], ref[t + 1][0], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got[1], ref[t + 1][1], rtol=1e-5, atol=1e-5)
    host.sync()  # the host's statistics into the variables
    for a, b in zip(host.statistics(), graph.statistics(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)


def test_actors_send_what_their_envs_saw_and_normalise_with_what_the_learner_merged():
    """actors-learner and async-actors: two actors (one stepping on the host, one in the graph)
    send their pending statistics; the learner's merge equals statistics over every env; an
    actor that adopts the learner's statistics normalises with them, and sends only what is new."""
    import tensorflow as tf

    from rlgen.runtime.normalize import Normalizer, RunningMeanStd

    obs, rew, term, trunc = random_steps(steps=10, envs=6)
    host, graph = (Normalizer((4,), 3, gamma=0.9, distributed=True) for _ in range(2))
    learner = Normalizer((4,), 6, gamma=0.9)
    host.reset(obs[0][:3])
    graph.observe_reset(tf.constant(obs[0][3:]))
    for t in range(len(rew)):
        host.step(obs[t + 1][:3], rew[t][:3], term[t][:3], trunc[t][:3])
        graph.observe_step(*(tf.constant(x[3:]) for x in (obs[t + 1], rew[t], term[t], trunc[t])))
    rows = np.concatenate([host.take_pending(), graph.take_pending()])
    assert rows.shape == (2, host.sums_size)
    learner.merge_received(rows)
    everything = RunningMeanStd((4,))  # SB3's prior count, then every observation of the 6 envs
    everything.update(np.concatenate(obs))
    for got, want in zip(learner.obs_rms.variables_in_order(), everything.variables_in_order(), strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9)
    assert learner.ret_rms.count.numpy() == pytest.approx(6 * 10 + 1e-4)
    assert host.take_pending()[0, 0] == graph.take_pending()[0, 0] == 0.0  # nothing new since
    for theirs, mine in zip(learner.statistics(), host.statistics(), strict=True):  # a pull
        mine.assign(theirs)
    host.adopt()
    mean, var = learner.obs_rms.mean.numpy(), learner.obs_rms.var.numpy()
    got, _ = host.step(obs[1][:3], rew[0][:3], term[0][:3], trunc[0][:3])
    np.testing.assert_allclose(got, np.clip((obs[1][:3] - mean) / np.sqrt(var + 1e-8), -10, 10), rtol=1e-5)
    assert host.take_pending()[0, 0] == 3.0  # the one new step of its 3 envs


def test_off_policy_envs_count_and_samples_are_normalised_with_the_statistics_as_they_are():
    """An off-policy learner's envs only count (the statistics equal those of the normalising
    path), and a replay sample of raw transitions is normalised with the current statistics."""
    from rlgen.runtime.normalize import Normalizer
    from rlgen.runtime.replay import Transitions

    obs, rew, term, trunc = random_steps()
    normalising, counting = Normalizer((4,), 3, gamma=0.9), Normalizer((4,), 3, gamma=0.9)
    normalising.reset(obs[0])
    counting.count_reset(obs[0])
    for t in range(len(rew)):
        normalising.step(obs[t + 1], rew[t], term[t], trunc[t])
        counting.count_step(obs[t + 1], rew[t], term[t], trunc[t])
    normalising.sync()
    (_, mean, var), (_, _, ret_var) = counting._host.stats["obs"], counting._host.stats["ret"]
    raw = Transitions(
        np.stack(obs[:8]), np.zeros((8, 3, 1), np.float32), np.stack(rew[:8]), np.stack(obs[1:9]), np.zeros((8, 3))
    )
    sample = counting.normalize_sampled(raw)

    def scaled(x):
        return np.clip((x - mean) / np.sqrt(var + 1e-8), -10, 10)

    np.testing.assert_allclose(sample.obs, scaled(raw.obs), rtol=1e-5)
    np.testing.assert_allclose(sample.next_obs, scaled(raw.next_obs), rtol=1e-5)
    np.testing.assert_allclose(sample.rewards, np.clip(raw.rewards / np.sqrt(ret_var + 1e-8), -10, 10), rtol=1e-5)
    assert sample.actions is raw.actions and sample.terminated is raw.terminated
    counting.sync()
    for a, b in zip(normalising.statistics(), counting.statistics(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)
    # where no env steps (a learner in another process) the variables are the statistics
    learner = Normalizer((4,), 3, gamma=0.9)
    for mine, theirs in zip(learner.statistics(), counting.statistics(), strict=True):
        mine.assign(theirs)
    np.testing.assert_allclose(learner.normalize_sampled(raw).obs, sample.obs, rtol=1e-6)


def test_results_arriving_one_env_group_at_a_time_count_as_whole_steps():
    """Central and pipelined inference: each env group's results arrive in env order; counted
    group by group they give the statistics and per-env returns of whole vector steps."""
    from rlgen.runtime.normalize import Normalizer

    obs, rew, term, trunc = random_steps(envs=6)
    whole, grouped = Normalizer((4,), 6, gamma=0.9), Normalizer((4,), 6, gamma=0.9)
    whole.reset(obs[0])
    for group in (slice(0, 3), slice(3, 6)):
        grouped.reset(obs[0][group], grouped.next_rows(3))
    for t in range(len(rew)):
        whole.step(obs[t + 1], rew[t], term[t], trunc[t])
        for group in (slice(0, 3), slice(3, 6)):
            rows = grouped.next_rows(3)
            assert rows == group
            grouped.step(obs[t + 1][group], rew[t][group], term[t][group], trunc[t][group], rows)
    np.testing.assert_allclose(grouped._host.returns, whole._host.returns, rtol=1e-12)
    whole.sync()
    grouped.sync()
    for a, b in zip(whole.statistics(), grouped.statistics(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9)


def test_partial_normalisation_leaves_the_other_part_alone():
    from rlgen.runtime.normalize import Normalizer

    obs, rew, term, trunc = random_steps(steps=5)
    only_reward = Normalizer((4,), 3, obs=False)
    np.testing.assert_array_equal(only_reward.reset(obs[0]), obs[0])
    o, r = only_reward.step(obs[1], rew[0], term[0], trunc[0])
    np.testing.assert_array_equal(o, obs[1])
    assert not np.allclose(r, rew[0])
    only_obs = Normalizer((4,), 3, reward=False)
    only_obs.reset(obs[0])
    o, r = only_obs.step(obs[1], rew[0], term[0], trunc[0])
    np.testing.assert_array_equal(r, rew[0])


def test_normalized_policy_acts_on_frozen_normalised_observations():
    import tensorflow as tf

    from rlgen.runtime.networks import build_network
    from rlgen.runtime.normalize import Normalizer
    from rlgen.runtime.policies import ActionSpec, Policy

    net = build_network({"kind": "mlp", "hidden": [8], "activation": "tanh", "init": "orthogonal"}, (4,), 1, seed=1)
    policy = Policy(net, ActionSpec(shape=(1,), low=(-2.0,), high=(2.0,)), seed=2)
    norm = Normalizer((4,), 3)
    obs, rew, term, trunc = random_steps(steps=10)
    norm.reset(obs[0])
    for t in range(10):
        norm.step(obs[t + 1], rew[t], term[t], trunc[t])
    norm.sync()
    before = [v.numpy().copy() for v in norm.statistics()]
    raw = tf.constant(obs[3])
    wrapped = norm.wrap(policy).act(raw, deterministic=True)[0].numpy()
    _, mean, var = (v.numpy() for v in norm.statistics()[:3])
    manual = np.clip((obs[3] - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
    np.testing.assert_allclose(wrapped, policy.act(tf.constant(manual), deterministic=True)[0].numpy(), rtol=1e-5)
    for a, b in zip(before, norm.statistics(), strict=True):  # acting never updates them
        np.testing.assert_array_equal(a, b.numpy())


# --- the spec ------------------------------------------------------------------------------
def test_normalize_defaults_match_the_schema_and_resolve_with_the_learners_gamma():
    props = SCHEMA["$defs"]["normalize"]["properties"]
    for key, value in plain(Normalize()).items():
        if value is not None:
            assert props[key]["default"] == value, key
    result = validate_text(spec_text(), "n.rl.yaml")
    assert result.ok, [d.message for d in result.diagnostics]
    written = resolved(result.spec)
    assert written["env"]["normalize"] == {
        "obs": True,
        "reward": True,
        "clip_obs": 10.0,
        "clip_reward": 10.0,
        "epsilon": 1e-8,
        "gamma": 0.9,  # the learner's
    }
    again = validate_text(yaml.safe_dump(written, sort_keys=False), "r.rl.yaml")
    assert again.ok and resolved(again.spec) == written
    own = resolved(validate_text(spec_text("{reward: true, gamma: 0.99, clip_obs: 5}"), "n.rl.yaml").spec)
    assert own["env"]["normalize"]["gamma"] == 0.99 and own["env"]["normalize"]["clip_obs"] == 5.0
    off = resolved(validate_text(spec_text("false"), "n.rl.yaml").spec)
    assert "normalize" not in off["env"]


POLICIES = ["single", "multi-learner", "actors-learner", "async-actors", "central-inference", "pipelined-inference"]
ENV_CUT = "  env: {at: env.step, send: [action], receive: [next_obs, reward, terminated, truncated]}\n"


@pytest.mark.parametrize("policy", POLICIES)
def test_normalisation_validates_under_every_policy(policy):
    text = spec_text().replace("partitions:\n", "partitions:\n" + ENV_CUT)
    result = validate_text(text, "n.rl.yaml", policy=policy, workers=1 if policy == "single" else 2)
    assert result.ok, [d.message for d in result.diagnostics]


def test_the_halfcheetah_example_validates():
    pytest.importorskip("mujoco")
    assert validate_file(ROOT / "examples" / "ppo-halfcheetah.rl.yaml").ok


# --- end to end -------------------------------------------------------------------------
def run(tmp_path: Path, text: str, name: str, *args: str, iterations: int = 2) -> Path:
    spec = tmp_path / f"{name}.rl.yaml"
    spec.write_text(text)
    run_dir = tmp_path / f"run-{name}"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(spec), "--run-dir", str(run_dir)]
        + ["--build-dir", str(tmp_path / f"build-{name}"), "--iterations", str(iterations), "--quiet", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return run_dir


def checkpoint_statistics(run_dir: Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    ckpt = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    names = [n for n, _ in tf.train.list_variables(ckpt) if n.startswith("module/normalizer/")]
    return {n.split("/")[2] + "/" + n.split("/")[3]: tf.train.load_variable(ckpt, n) for n in names}


def assert_exports_normalising_policy(tmp_path: Path, build: str, module: str, run_dir: Path) -> None:
    """The exported SavedModel acts on raw observations as the checkpointed policy does on
    observations normalised with the checkpointed statistics."""
    import importlib

    import tensorflow as tf

    stats = checkpoint_statistics(run_dir)
    sys.path.insert(0, str(tmp_path / build))
    try:
        for name in [m for m in sys.modules if m == "normtest" or m.startswith("normtest.")]:
            del sys.modules[name]  # another build's package of the same name
        fragment = importlib.import_module(f"normtest.{module}")
    finally:
        sys.path.remove(str(tmp_path / build))
    holder = next(getattr(fragment, n) for n in dir(fragment) if n.endswith("Fragment"))(0, 0)
    checkpoint = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    tf.train.Checkpoint(module=holder).restore(checkpoint).expect_partial()
    raw = np.array([[0.9, -0.4, 3.0], [-0.2, 0.98, -6.0]], np.float32)
    normalised = np.clip((raw - stats["obs_rms/mean"]) / np.sqrt(stats["obs_rms/var"] + 1e-8), -10, 10)
    expected = holder.actor.act(tf.constant(normalised, tf.float32), deterministic=True)[0].numpy()
    model = tf.saved_model.load(str(run_dir / "policy"))  # kept: its functions use its variables
    exported = model.act(tf.constant(raw)).numpy()
    np.testing.assert_allclose(exported, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(exported, holder.actor.act(tf.constant(raw), deterministic=True)[0].numpy())


@pytest.mark.parametrize("backend", ["gymnasium", "tensorflow"])  # host, or in the fused iteration's graph
def test_single_run_checkpoints_the_statistics_and_exports_a_normalising_policy(tmp_path, backend):
    run_dir = run(tmp_path, spec_text().replace("num_envs: 4,", f"num_envs: 4, backend: {backend},"), "single")
    stats = checkpoint_statistics(run_dir)
    # 4 envs: one reset and 2 x 32 steps each, after SB3's prior count of 1e-4
    assert stats["obs_rms/count"] == pytest.approx(4 * (1 + 64) + 1e-4)
    assert stats["ret_rms/count"] == pytest.approx(4 * 64 + 1e-4)
    assert_exports_normalising_policy(tmp_path, "build-single", "agent", run_dir)


def test_reported_returns_stay_raw(tmp_path):
    """With observations raw and the same seed, the policy acts the same until its first update:
    the episodes of the first iteration must report the same (raw) returns with and without
    reward normalisation."""
    plain = run(tmp_path, spec_text("false", repeat=208), "plain", iterations=1)
    scaled = run(tmp_path, spec_text("{obs: false, reward: true}", repeat=208), "scaled", iterations=1)
    rows = [json.loads((d / "metrics.jsonl").read_text().splitlines()[0]) for d in (plain, scaled)]
    assert rows[0]["episodes"] == rows[1]["episodes"] == 4
    assert rows[1]["mean_return"] == rows[0]["mean_return"] < -500  # Pendulum's raw scale


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_multi_learner_ranks_end_with_the_same_statistics(tmp_path):
    run_dir = run(tmp_path, spec_text(), "multi", "--policy", "multi-learner", "--workers", "2")
    done = [json.loads((run_dir / "ranks" / f"{r}.done").read_text()) for r in (0, 1)]
    assert done[0]["normalizer_sha256"] == done[1]["normalizer_sha256"]
    assert done[0]["weights_sha256"] == done[1]["weights_sha256"]
    stats = checkpoint_statistics(run_dir)
    # every rank's observations are in them: 2 ranks x 2 envs, one reset and 2 x 32 steps each
    assert stats["obs_rms/count"] == pytest.approx(4 * (1 + 64) + 1e-4)


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
@pytest.mark.parametrize("policy", ["central-inference", "pipelined-inference"])
def test_inference_policies_count_every_result_where_it_arrives(tmp_path, policy):
    text = spec_text().replace("partitions:\n", "partitions:\n" + ENV_CUT)
    run_dir = run(tmp_path, text, "inference", "--policy", policy, "--workers", "3")
    stats = checkpoint_statistics(run_dir)
    # 2 env workers x 2 envs (in 2 groups under pipelined inference), one reset and 2 x 32 steps
    assert stats["obs_rms/count"] == pytest.approx(4 * (1 + 64) + 1e-4)
    assert stats["ret_rms/count"] == pytest.approx(4 * 64 + 1e-4)
    assert_exports_normalising_policy(tmp_path, "build-inference", "learner", run_dir)


def off_policy_spec(example: str) -> str:
    """An example with normalisation, learning from its 200th env step."""
    text = (ROOT / "examples" / f"{example}.rl.yaml").read_text()
    return text.replace("\n  num_envs: 1", "\n  normalize: true\n  num_envs: 1", 1)


@pytest.mark.parametrize(
    "policy", ["single", pytest.param("actors-learner", marks=pytest.mark.skipif(not HOROVOD, reason="no horovodrun"))]
)
def test_sac_counts_every_step_samples_normalised_and_exports_a_normalising_policy(tmp_path, policy):
    text = off_policy_spec("sac-pendulum").replace("name: sac-pendulum", "name: normtest")
    args = ("--policy", policy, "--workers", "1" if policy == "single" else "2", "--set", "loop.learn.after=100")
    run_dir = run(tmp_path, text, "sac", *args, iterations=300)
    stats = checkpoint_statistics(run_dir)
    assert stats["obs_rms/count"] == pytest.approx(1 + 300 + 1e-4)  # one env: its reset, 300 steps
    assert stats["ret_rms/count"] == pytest.approx(300 + 1e-4)
    source = "\n".join(p.read_text() for p in (tmp_path / "build-sac" / "normtest").glob("*.py"))
    assert "normalize_sampled(self.replay.sample_many(" in source  # the replay keeps raw transitions
    assert "self.actor.act(self.normalizer.normalize_obs(obs)" in source
    assert_exports_normalising_policy(tmp_path, "build-sac", "learner" if policy != "single" else "agent", run_dir)


def test_dqn_normalises_what_its_q_network_acts_on(tmp_path):
    run_dir = run(tmp_path, off_policy_spec("dqn-cartpole"), "dqn", iterations=2)
    stats = checkpoint_statistics(run_dir)
    assert stats["obs_rms/count"] == pytest.approx(1 + 2 * 256 + 1e-4)
    source = (tmp_path / "build-dqn" / "dqn_cartpole" / "agent.py").read_text()
    assert "self.q.act(self.normalizer.normalize_obs(obs)," in "".join(source.split())


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_actors_learner_merges_every_observation_its_actors_saw(tmp_path):
    from rlgen.runtime.normalize import Normalizer

    run_dir = run(tmp_path, spec_text(), "al", "--policy", "actors-learner", "--workers", "3")
    stats = checkpoint_statistics(run_dir)
    # 2 actors x 2 envs, one reset and 2 x 32 steps each: every rollout reached the learner
    assert stats["obs_rms/count"] == pytest.approx(4 * (1 + 64) + 1e-4)
    assert stats["ret_rms/count"] == pytest.approx(4 * 64 + 1e-4)
    plan = json.loads((tmp_path / "build-al" / "plan.json").read_text())
    sums = {f["name"]: f["normalize"].get("sums") for f in plan["fragments"] if f.get("normalize")}
    size = Normalizer((3,), 1).sums_size  # a row of an actor's sums, as both sides read it
    assert sums == {"actor_env": None, "actor": size, "learner": size}
    assert_exports_normalising_policy(tmp_path, "build-al", "learner", run_dir)


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_async_actors_merge_the_rollouts_the_learner_took(tmp_path):
    run_dir = run(tmp_path, spec_text(), "async", "--policy", "async-actors", "--workers", "3")
    stats = checkpoint_statistics(run_dir)
    # the learner took 2 rollouts per iteration, from whichever actor came first: 2 envs x 32
    # steps each, plus its 2 envs' first observations for an actor's first rollout
    assert stats["ret_rms/count"] == pytest.approx(4 * 64 + 1e-4)
    resets = stats["obs_rms/count"] - stats["ret_rms/count"]
    assert resets == pytest.approx(2) or resets == pytest.approx(4)
    assert_exports_normalising_policy(tmp_path, "build-async", "learner", run_dir)
