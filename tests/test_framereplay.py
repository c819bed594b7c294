"""The frame-sharing replay buffer returns exactly what a naive replay buffer returns."""

from __future__ import annotations

import numpy as np
import pytest

from rlgen.runtime.framereplay import FrameReplayBuffer
from rlgen.runtime.replay import ReplayBuffer


def _episodes(steps: int, envs: int, stack: int, seed: int, zero_pad: bool = False):
    """Vector steps of envs whose observations are sliding stacks of random frames, with
    episode ends (NEXT_STEP autoreset: the step after an end is a reset step). A reset's stack
    is its first frame repeated (a plain ``FrameStackObservation``) or zero frames then it
    (``zero_pad``: the atari preset under both backends)."""
    rng = np.random.default_rng(seed)
    new = lambda: rng.integers(0, 256, (6, 5), dtype=np.uint8)  # noqa: E731

    def first():
        frame = new()
        return np.stack([np.zeros_like(frame) if zero_pad else frame] * (stack - 1) + [frame])

    stacks = [first() for _ in range(envs)]
    for _ in range(steps):
        obs = np.stack(stacks)
        nxt, term, trunc = [], np.zeros(envs, bool), np.zeros(envs, bool)
        for i in range(envs):
            end = rng.random() < 0.08
            term[i], trunc[i] = end and rng.random() < 0.5, end
            s = np.concatenate([stacks[i][1:], new()[None]])
            nxt.append(s)
            stacks[i] = first() if end else s
        yield (
            obs,
            rng.integers(0, 4, envs).astype(np.int32),
            rng.random(envs).astype(np.float32),
            np.stack(nxt),
            term,
            trunc | term,
        )


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize(("stack", "zero_pad"), [(4, False), (4, True), (1, False)])
def test_frame_replay_equals_naive_replay(stack, zero_pad, compress):
    envs, cap = 3, 500
    naive = ReplayBuffer(cap, (stack, 6, 5), num_envs=envs, seed=0, obs_dtype=np.uint8)
    shared = FrameReplayBuffer(cap, (stack, 6, 5), num_envs=envs, seed=0, frame_capacity=10**5, compress=compress)
    for step in _episodes(120, envs, stack, seed=1, zero_pad=zero_pad):
        assert naive.record(*step) == shared.record(*step)
    assert len(naive) == len(shared) == naive.inserted
    a, b = naive.transitions(), shared.transitions()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    index = np.random.default_rng(2).integers(0, len(naive), (7, 32))
    for x, y in zip(naive._gather(index), shared._gather(index), strict=True):
        np.testing.assert_array_equal(x, y)
    assert b.obs.dtype == np.uint8
    if stack == 4:
        assert shared._written < 0.5 * len(shared) * 2 * stack  # each frame stored once, not 2 x stack times


@pytest.mark.parametrize("compress", [False, True])
def test_frame_ring_drops_oldest_transitions_never_serves_overwritten_frames(compress):
    envs, cap = 2, 200
    shared = FrameReplayBuffer(cap, (4, 6, 5), num_envs=envs, seed=0, compress=compress)
    naive = ReplayBuffer(cap, (4, 6, 5), num_envs=envs, seed=0)
    for step in _episodes(700, envs, 4, seed=3):
        naive.record(*step)
        shared.record(*step)
    assert 0.8 * cap <= len(shared) <= cap
    got, want = shared.transitions(), naive.transitions()
    order = (naive.pos + np.arange(cap)) % cap
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(x, y[order][-len(shared) :].astype(x.dtype))


def test_compressed_ring_holds_atari_like_frames_in_a_fraction_of_their_bytes():
    """Frames that are mostly background (as Atari's after the Zoo's preprocessing) take a small
    part of their raw size compressed, and sampling returns them unchanged."""
    rng = np.random.default_rng(0)
    cap, shape = 300, (4, 84, 84)
    plain = FrameReplayBuffer(cap, shape, seed=5)
    packed = FrameReplayBuffer(cap, shape, seed=5, compress=True)
    obs = np.zeros((1, *shape), np.uint8)
    for _ in range(cap):
        frame = np.zeros((84, 84), np.uint8)
        y, x = rng.integers(0, 80, 2)
        frame[y : y + 4, x : x + 2] = 200  # a ball
        frame[78:80, :] = 142  # a paddle row
        nxt = np.concatenate([obs[:, 1:], frame[None, None]], axis=1)
        for buf in (plain, packed):
            buf.insert(obs, np.zeros(1, np.int32), np.zeros(1, np.float32), nxt, np.zeros(1, np.float32))
        obs = nxt
    assert packed.frame_bytes < plain.frame_bytes / 10
    for x, y in zip(plain.sample(64), packed.sample(64), strict=True):
        np.testing.assert_array_equal(x, y)
