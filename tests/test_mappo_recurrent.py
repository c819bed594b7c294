"""MAPPO with recurrent networks (the reference's rmappo), driven from Python: act step by
step carrying GRU states, store them with the rollout, and the learner's chunked
recomputation gives back exactly what was acted with, wherever episodes start (mid-chunk, at a
chunk's first step, at a rollout's first step) and across rollouts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig  # noqa: E402
from rlgen.algorithms.mappo.learner import MAPPOLearner  # noqa: E402
from rlgen.runtime.buffers import RolloutBuffer  # noqa: E402
from rlgen.runtime.policies import ActionSpec, Policy, Value  # noqa: E402
from rlgen.runtime.recurrent import RecurrentMLP  # noqa: E402
from rlgen.runtime.sequences import chunks, restarts, to_sequences  # noqa: E402

T, B, OBS, STATE, ACTIONS, H = 25, 6, 5, 7, 4, 8


def components(recurrent_value: bool = True, seed: int = 0):
    # output gain 1, not a policy head's 0.01: log-probabilities far from uniform, so that a wrong
    # state would show
    pi = Policy(RecurrentMLP((OBS,), [16], H, ACTIONS, output_gain=1.0, seed=seed, layer_norm=True), ActionSpec(n=4))
    if recurrent_value:
        v = Value(RecurrentMLP((STATE,), [16], H, 1, seed=seed + 1, layer_norm=True))
    else:
        from rlgen.runtime.networks import MLP

        v = Value(MLP((STATE,), [16], 1, seed=seed + 1))
    return pi, v


def collect(pi: Policy, v: Value, rollouts: int, rng: np.random.Generator):
    """``rollouts`` rollouts of a toy env with NEXT_STEP autoreset: after a done step comes a
    reset row (its observation the final one), then a row that begins an episode (``first``)."""
    value_size = H if v.recurrent else 0
    buffer = RolloutBuffer(T, B, (OBS,), state_shape=(STATE,), memory=(H, value_size))
    h, hv = pi.initial_state(B), (v.initial_state(B) if v.recurrent else tf.zeros([B, 0]))
    first, reset_row = np.ones(B, bool), np.zeros(B, bool)
    out = []
    for _ in range(rollouts):
        for _ in range(T):
            obs = rng.standard_normal((B, OBS)).astype(np.float32)
            state = rng.standard_normal((B, STATE)).astype(np.float32)
            action, logp, next_h = pi.act_recurrent(tf.constant(obs), h, tf.constant(first))
            if v.recurrent:
                value, next_hv = v.value_recurrent(tf.constant(state), hv, tf.constant(first))
            else:
                value, next_hv = v.value(tf.constant(state)), hv
            done = ~reset_row & (rng.random(B) < 0.15)
            terminated = done & (rng.random(B) < 0.5)
            memory = (first.astype(np.float32), h.numpy(), hv.numpy())
            buffer.insert(obs, action.numpy(), rng.random(B).astype(np.float32), terminated, done & ~terminated,
                          logp.numpy(), value.numpy(), state, memory)  # fmt: skip
            first, reset_row = reset_row.copy(), done
            h, hv = next_h, next_hv
        out.append(
            (
                [np.array(x) for x in buffer.rollout()],
                [np.array(x) for x in buffer.memory()],
                rng.standard_normal((B, OBS)).astype(np.float32),
                rng.standard_normal((B, STATE)).astype(np.float32),
                (first.astype(np.float32), hv.numpy()),
            )
        )
    return out


@pytest.mark.parametrize("chunk", [10, 25, 3])
def test_chunked_recomputation_gives_back_what_was_acted_with(chunk):
    pi, v = components()
    rollouts = collect(pi, v, 2, np.random.default_rng(chunk))
    for i, (data, memory, *_) in enumerate(rollouts):
        obs, _, _, _, _, valid, logp, values, states = (tf.constant(x) for x in data)
        first, h, hv = (tf.constant(x) for x in memory)
        assert memory[0][1:].any()  # some rows start episodes mid-rollout
        at = restarts(obs.shape[0], obs.shape[1], chunk)
        h_seq, hv_seq = to_sequences(h, chunk), to_sequences(hv, chunk)
        dist = pi.distribution_seq(to_sequences(obs, chunk), h_seq[0], to_sequences(first, chunk), (at, h_seq))
        seq_actions = tf.reshape(to_sequences(tf.constant(data[1]), chunk), [-1])
        got = dist.log_prob(seq_actions).numpy()
        want = tf.reshape(to_sequences(logp, chunk), [-1]).numpy()
        mask = tf.reshape(to_sequences(valid, chunk), [-1]).numpy() > 0
        np.testing.assert_allclose(got[mask], want[mask], atol=1e-5)
        got_v = v.value_seq(to_sequences(states, chunk), hv_seq[0], to_sequences(first, chunk), (at, hv_seq))
        want_v = tf.reshape(to_sequences(values, chunk), [-1]).numpy()
        np.testing.assert_allclose(got_v.numpy()[mask], want_v[mask], atol=1e-5)
        if i == 0:  # every row's first chunk starts its first episode
            continue
        # the second rollout's chunks start from carried states: from zeros the recomputation differs
        zeros = tf.zeros_like(h_seq)
        other = pi.distribution_seq(to_sequences(obs, chunk), zeros[0], to_sequences(first, chunk), (at, zeros))
        assert np.abs(other.log_prob(seq_actions).numpy()[mask] - want[mask]).max() > 1e-2
        # a sequence that runs on into another row must take that row's stored state, not carry its own
        carried = pi.distribution_seq(to_sequences(obs, chunk), h_seq[0], to_sequences(first, chunk))
        if chunk != 25:  # 25 divides the 25-step rows: no sequence runs on into another row
            assert np.abs(carried.log_prob(seq_actions).numpy()[mask] - want[mask]).max() > 1e-2


def test_rows_are_laid_end_to_end_and_cut_into_chunks():
    x = tf.reshape(tf.range(2 * 26), [2, 26])  # row b, step t holds b*26 + t
    seqs = to_sequences(tf.transpose(x), 10)  # [T, B] in
    assert chunks(26, 2, 10) == 6 and seqs.shape == (10, 6)
    laid = tf.reshape(tf.transpose(seqs), [-1]).numpy()
    np.testing.assert_array_equal(laid[:52], np.arange(52))  # end to end, in row order
    np.testing.assert_array_equal(laid[52:], 0)  # the last chunk padded
    at = restarts(26, 2, 10)
    starts = np.flatnonzero(np.transpose(at).reshape(-1))
    np.testing.assert_array_equal(starts, [0, 10, 20, 26, 30, 40, 50])  # chunk starts and row 1's start
    # the cuts move from row to row: row 0 is cut at steps 10 and 20, row 1 at 4, 14 and 24
    assert {p % 26 for p in starts if p >= 26} == {0, 4, 14, 24}


@pytest.mark.parametrize(("recurrent_value", "minibatch"), [(True, None), (True, 30), (False, None)])
def test_an_update_at_zero_learning_rate_sees_ratio_one_everywhere(recurrent_value, minibatch):
    pi, v = components(recurrent_value)
    cfg = dataclasses.replace(MAPPOConfig(), lr=0.0, epochs=2, minibatch=minibatch)
    learner = MAPPOLearner(pi, v, cfg, T, B, (OBS,), state_shape=(STATE,))
    assert learner.sequences == 15  # 6 rows of 25 steps laid end to end: 15 chunks of 10
    assert learner.minibatches_per_epoch == (1 if minibatch is None else 5)  # 30 steps: 3 chunks a minibatch
    for data, memory, last_obs, last_state, last_memory in collect(pi, v, 2, np.random.default_rng(7)):
        from rlgen.runtime.buffers import StateRollout

        metrics = learner.update(StateRollout(*data), last_obs, last_state, memory=memory, last_memory=last_memory)
        assert metrics["approx_kl"] == pytest.approx(0.0, abs=1e-6)
        assert metrics["clip_fraction"] == 0.0
        assert set(metrics) == set(METRICS)


def test_an_update_learns_and_moves_both_networks():
    pi, v = components()
    learner = MAPPOLearner(pi, v, MAPPOConfig(), T, B, (OBS,), state_shape=(STATE,))
    before = [x.numpy().copy() for x in (pi.network.gru.w_h, v.network.gru.w_h)]
    (data, memory, last_obs, last_state, last_memory), *_ = collect(pi, v, 1, np.random.default_rng(3))
    from rlgen.runtime.buffers import StateRollout

    metrics = learner.update(StateRollout(*data), last_obs, last_state, memory=memory, last_memory=last_memory)
    assert metrics["approx_kl"] > 0 and np.isfinite(metrics["value_loss"])
    after = [x.numpy() for x in (pi.network.gru.w_h, v.network.gru.w_h)]
    assert all(not np.allclose(a, b) for a, b in zip(before, after, strict=True))


def test_a_recurrent_learner_refuses_what_it_cannot_train():
    pi, v = components()
    with pytest.raises(ValueError, match="whole number of chunks"):
        MAPPOLearner(pi, v, dataclasses.replace(MAPPOConfig(), minibatch=25), T, B, (OBS,), state_shape=(STATE,))
    learner = MAPPOLearner(pi, v, MAPPOConfig(), T, B, (OBS,), state_shape=(STATE,))
    (data, _, last_obs, last_state, _), *_ = collect(pi, v, 1, np.random.default_rng(0))
    from rlgen.runtime.buffers import StateRollout

    with pytest.raises(ValueError, match="needs memory"):
        learner.update(StateRollout(*data), last_obs, last_state)


def test_the_graph_buffer_stores_memory_as_the_numpy_buffer_does():
    from rlgen.runtime.graphbuffers import GraphRolloutBuffer

    rng = np.random.default_rng(9)
    host = RolloutBuffer(4, 3, (2,), memory=(5, 0))
    graph = GraphRolloutBuffer(4, 3, (2,), memory=(5, 0))
    rows = graph.begin()
    for t in range(4):
        f32 = np.float32
        row = (rng.standard_normal((3, 2)).astype(f32), rng.integers(0, 2, 3).astype(np.int32),
               rng.random(3).astype(f32), rng.random(3) < 0.3, rng.random(3) < 0.2, rng.random(3).astype(f32),
               rng.random(3).astype(f32))  # fmt: skip
        memory = (rng.random(3) < 0.5, rng.standard_normal((3, 5)).astype(f32), np.zeros((3, 0), f32))
        host.insert(*row, memory=memory)
        rows = graph.insert(rows, t, *(tf.constant(x) for x in row), memory=tuple(tf.constant(x) for x in memory))
    for x, y in zip((*host.rollout(), *host.memory()), (*graph.end(rows), *graph.memory(rows)), strict=True):
        np.testing.assert_allclose(x, y.numpy(), atol=1e-6)
    assert graph.memory(rows).policy_states.shape == (4, 3, 5)
    with pytest.raises(ValueError, match="pass memory"):
        graph.insert(graph.begin(), 0, *(tf.constant(x) for x in row))
