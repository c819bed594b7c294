"""A replay buffer for stacked image observations that stores each frame once.

A frame-stacked observation ``[stack, H, W]`` (``FrameStackObservation`` or envpool) shares
``stack - 1`` frames with the previous step's and ``obs`` of a transition is ``next_obs`` of
the env's previous one: a naive buffer stores every frame ``2 * stack`` times (5.6 GB of
uint8 for the RL Zoo's 100k Atari transitions). SB3's ``optimize_memory_usage`` keeps ``obs``
once (half); this keeps each *frame* once, and a transition as two rows of ``stack`` frame
ids (``obs`` and ``next_obs``): about ``H * W`` bytes per transition (0.7 GB for 100k).

Frames live in a ring of ``frame_capacity`` slots written in order. A transition's frames were
all written no earlier than ``stack - 1`` vector steps before it (its ``floor``), so when the
ring is about to overwrite frames a stored transition still reads, the oldest transitions are
dropped first (``size`` shrinks below ``capacity`` by a few percent at most with the default
``frame_capacity``; episodes' first stacks cost their distinct frames). Sampling returns
exactly the stacked arrays a :class:`~rlgen.runtime.replay.ReplayBuffer` holding the same
transitions returns for the same indices (a test checks it).

With ``compress=True`` each frame is kept zlib-compressed (level 1) and a sample decompresses
the distinct frames it reads, once for ``obs`` and ``next_obs`` together. Atari frames after the
Zoo's preprocessing compress about 20x (Breakout) to 30x (Pong): the Zoo's 100k transitions of
Pong took 26 MiB of frames instead of 741, for about 5 microseconds more a stored transition and
1 ms more a sampled batch of 32 (docs/benchmarks.md, "DQN's replay, compressed"). As RLlib's
``compress_observations``, it is lossless: samples are the same arrays either way.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Sequence

import numpy as np

from rlgen.dsl.images import image_layout

from .replay import ReplayBuffer, Transitions


class FrameReplayBuffer(ReplayBuffer):
    """:class:`ReplayBuffer`'s interface (insert, record, sample, sample_many, transitions) over
    shared frames. ``obs_shape`` is ``[stack, H, W]`` (channels-first stacks); any other image or
    vector shape is one "frame" per observation (stack 1: each observation stored once).
    ``compress``: keep frames zlib-compressed (see the module's note)."""

    def __init__(
        self,
        capacity: int,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        action_dtype: type[np.generic] | np.dtype = np.int32,
        num_envs: int = 1,
        seed: int | None = None,
        obs_dtype: type[np.generic] | np.dtype = np.uint8,
        frame_capacity: int | None = None,
        compress: bool = False,
    ) -> None:
        super().__init__(1, (), action_shape, action_dtype, num_envs, seed)  # scalars only; obs below
        self.capacity = int(capacity)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        layout = image_layout(self.obs_shape)
        self.stack = self.obs_shape[0] if layout is not None and layout[0] and len(self.obs_shape) == 3 else 1
        frame_shape = self.obs_shape[1:] if self.stack > 1 else self.obs_shape
        n, b, k = self.capacity, self.num_envs, self.stack
        self.frame_capacity = int(frame_capacity or n + n // 10 + 2 * b * (k + 1) ** 2)
        self.compress = bool(compress)
        self.frame_shape, self.frame_dtype = tuple(frame_shape), np.dtype(obs_dtype)
        if self.compress:  # a ring of zlib streams (bytes), each one frame's
            self.frames: np.ndarray | list[bytes] = [b""] * self.frame_capacity
        else:
            self.frames = np.zeros((self.frame_capacity, *frame_shape), obs_dtype)
        self._data = Transitions(
            obs=np.zeros((n, k), np.int64),  # frame numbers (ever written), not slots
            actions=np.zeros((n, *self.action_shape), action_dtype),
            rewards=np.zeros(n, np.float32),
            next_obs=np.zeros((n, k), np.int64),
            terminated=np.zeros(n, np.float32),
        )
        self._floor = np.zeros(n, np.int64)  # the first frame number a transition may read
        self._written = 0  # frames ever written
        self._step_starts = [0] * k  # frames written before each of the last ``stack`` vector steps
        self._last = [None] * b  # per env: (frame numbers, the observation) of its last next_obs
        self.oldest = 0  # ring slot of the oldest stored transition

    def _put(self, frame: np.ndarray) -> int:
        slot = self._written % self.frame_capacity
        if self.compress:
            self.frames[slot] = zlib.compress(np.asarray(frame, self.frame_dtype).tobytes(), 1)
        else:
            self.frames[slot] = frame
        self._written += 1
        return self._written - 1

    def _ids(self, env: int, obs: np.ndarray) -> np.ndarray:
        """Frame numbers of ``obs`` in env ``env``: its last next_obs if equal, else new frames
        (equal neighbours, as a reset's padded stack, stored once)."""
        last = self._last[env]
        if last is not None and np.array_equal(last[1], obs):
            return last[0]
        frames = obs if self.stack > 1 else obs[None]
        ids = np.empty(self.stack, np.int64)
        for j in range(self.stack):
            same = j > 0 and np.array_equal(frames[j], frames[j - 1])
            ids[j] = ids[j - 1] if same else self._put(frames[j])
        return ids

    def insert(self, obs, action, reward, next_obs, terminated, valid=None) -> int:
        b = self.num_envs
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        if obs.shape != (b, *self.obs_shape) or next_obs.shape != (b, *self.obs_shape):
            raise ValueError(f"obs/next_obs shapes {obs.shape}, {next_obs.shape}; expected {(b, *self.obs_shape)}")
        self._step_starts = [*self._step_starts[1:], self._written]
        floor = self._step_starts[0]
        rows = range(b) if valid is None else np.flatnonzero(valid)
        action, reward, terminated = np.asarray(action), np.asarray(reward), np.asarray(terminated)
        count = 0
        for i in rows:
            obs_ids = self._ids(i, obs[i])
            if self.stack > 1 and np.array_equal(next_obs[i][:-1], obs[i][1:]):
                next_ids = np.append(obs_ids[1:], self._put(next_obs[i][-1]))
            else:  # a reset (or an unstacked observation): its own frames
                next_ids = self._ids(i, next_obs[i])
            self._last[i] = (next_ids, next_obs[i].copy())
            self._store(obs_ids, action[i], reward[i], next_ids, terminated[i], min(floor, int(obs_ids.min())))
            count += 1
        self._evict()
        self.inserted += count
        return count

    def _store(self, obs_ids, action, reward, next_ids, terminated, floor) -> None:
        slot = self.pos
        for store, x in zip(self._data, (obs_ids, action, reward, next_ids, terminated), strict=True):
            store[slot] = x
        self._floor[slot] = floor
        self.pos = (slot + 1) % self.capacity
        if self.size == self.capacity:
            self.oldest = self.pos
        else:
            self.size += 1

    def _evict(self) -> None:
        """Drop the oldest transitions whose frames the ring has overwritten or will next."""
        lowest = self._written - self.frame_capacity
        while self.size and self._floor[self.oldest] < lowest:
            self.oldest = (self.oldest + 1) % self.capacity
            self.size -= 1

    def _indices(self, shape: tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return (self.oldest + (rng or self.rng).integers(0, self.size, size=shape)) % self.capacity

    def _stacked(self, ids: np.ndarray) -> np.ndarray:
        """The observations of frame-number rows ``ids`` (``[m, stack]``), ``[m, *obs_shape]``."""
        slots = ids % self.frame_capacity
        if not self.compress:
            return self.frames.take(slots, axis=0).reshape(len(ids), *self.obs_shape)
        distinct, where = np.unique(slots, return_inverse=True)
        frames = np.empty((len(distinct), *self.frame_shape), self.frame_dtype)
        for row, slot in enumerate(distinct.tolist()):
            frames[row] = np.frombuffer(zlib.decompress(self.frames[slot]), self.frame_dtype).reshape(self.frame_shape)
        return frames[where.reshape(slots.shape)].reshape(len(ids), *self.obs_shape)

    def _gather(self, index: np.ndarray) -> Transitions:
        flat, shape = index.reshape(-1), index.shape
        d = self._data
        both = self._stacked(np.concatenate([d.obs.take(flat, axis=0), d.next_obs.take(flat, axis=0)]))
        obs, next_obs = both[: len(flat)], both[len(flat) :]
        parts = (obs, d.actions.take(flat, axis=0), d.rewards.take(flat), next_obs, d.terminated.take(flat))
        return Transitions(*(x.reshape(*shape, *x.shape[1:]) for x in parts))

    def transitions(self) -> Transitions:
        """Every stored transition, oldest first (fields ``[size, ...]``; copies)."""
        return self._gather((self.oldest + np.arange(self.size)) % self.capacity)

    @property
    def frame_bytes(self) -> int:
        """Bytes the frame ring holds (compressed: the streams, their objects and the list)."""
        if not self.compress:
            return int(self.frames.nbytes)
        objects = min(self._written, self.frame_capacity) * sys.getsizeof(b"")
        return int(sum(map(len, self.frames)) + objects + sys.getsizeof(self.frames))

    @property
    def nbytes(self) -> int:
        """Bytes held: the frame ring and the transitions' rows."""
        return self.frame_bytes + int(sum(x.nbytes for x in self._data) + self._floor.nbytes)
