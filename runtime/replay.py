"""Off-policy experience storage: a circular buffer of transitions in NumPy arrays.

A transition is ``(obs, action, reward, next_obs, terminated)``. The buffer takes one
vector step of ``B`` envs per :meth:`ReplayBuffer.insert` and stores only its valid
rows, one after another in a flat ring of ``capacity`` transitions (so the
capacity counts transitions, not steps of ``B`` envs).

Step convention (:mod:`rlgen.runtime.envs`, gymnasium's ``NEXT_STEP`` autoreset):
the step after an episode ends is a *reset step*; its action is ignored and it
carries no transition, so pass ``valid = VectorEnv.valid`` and those rows are
skipped. The step that ends an episode returns the episode's *final* observation,
so ``next_obs`` of a truncated episode's last transition is the right state to
bootstrap from (``terminated`` is false there, and the TD target keeps
``gamma * max Q(next_obs)``), as Stable-Baselines3 does with
``handle_timeout_termination``.

:meth:`ReplayBuffer.sample_many` draws ``n`` independent minibatches at once as
stacked ``[n, batch, ...]`` arrays, so a learner can run ``n`` gradient steps in
one compiled call (per-call overhead dominates at small batch on a CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class Transitions(NamedTuple):
    """A batch of transitions, each field ``[..., *item_shape]``; ``terminated`` is float32 0/1."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray


class ReplayBuffer:
    """Circular storage of the last ``capacity`` valid transitions of ``num_envs`` envs.

    Sampling is uniform with replacement over the stored transitions (as
    Stable-Baselines3's ``ReplayBuffer`` without ``optimize_memory_usage``).
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        action_dtype: type[np.generic] | np.dtype = np.int32,
        num_envs: int = 1,
        seed: int | None = None,
        obs_dtype: type[np.generic] | np.dtype = np.float32,
    ) -> None:
        if capacity < 1 or num_envs < 1:
            raise ValueError("capacity and num_envs must be >= 1")
        self.capacity, self.num_envs = int(capacity), int(num_envs)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.action_shape = tuple(int(d) for d in action_shape)
        n = self.capacity
        self._data = Transitions(
            obs=np.zeros((n, *self.obs_shape), obs_dtype),
            actions=np.zeros((n, *self.action_shape), action_dtype),
            rewards=np.zeros(n, np.float32),
            next_obs=np.zeros((n, *self.obs_shape), obs_dtype),
            terminated=np.zeros(n, np.float32),
        )
        self.pos = 0  # next slot to write
        self.size = 0  # transitions stored (<= capacity)
        self.inserted = 0  # valid transitions ever inserted
        self.rng = np.random.default_rng(seed)  # sampling, unless a call passes its own
        self._prev_done = np.zeros(self.num_envs, bool)  # for :meth:`record`

    def __len__(self) -> int:
        return self.size

    @property
    def full(self) -> bool:
        return self.size == self.capacity

    def insert(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        valid: np.ndarray | None = None,
    ) -> int:
        """Store the valid rows of one vector step (each argument ``[B, ...]``).

        ``valid`` (``[B]`` bool, default all) is :attr:`VectorEnv.valid` after the
        step; reset-step rows are dropped. Returns how many transitions were stored.
        """
        b = self.num_envs
        if np.shape(obs) != (b, *self.obs_shape) or np.shape(next_obs) != (b, *self.obs_shape):
            raise ValueError(
                f"obs/next_obs shapes {np.shape(obs)}, {np.shape(next_obs)}; expected {(b, *self.obs_shape)}"
            )
        if valid is None or bool(np.all(valid)):
            rows: slice | np.ndarray = slice(None)
            count = b
        else:
            rows = np.flatnonzero(valid)
            count = int(rows.size)
            if count == 0:
                return 0
        items = (obs, action, reward, next_obs, terminated)
        if count > self.capacity:  # more rows than room: only the last ones survive
            rows = np.arange(b)[rows][-self.capacity :]
            count = self.capacity
        end = self.pos + count
        if end <= self.capacity:
            for store, x in zip(self._data, items, strict=True):
                store[self.pos : end] = np.asarray(x)[rows]
        else:
            slots = np.arange(self.pos, end) % self.capacity
            for store, x in zip(self._data, items, strict=True):
                store[slots] = np.asarray(x)[rows]
        self.pos = end % self.capacity
        self.size = min(self.size + count, self.capacity)
        self.inserted += count
        return count

    def record(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> int:
        """:meth:`insert` one vector step, telling reset steps by the previous step's flags.

        A row is a reset step (no transition) when that env's previous recorded step
        ended an episode (``terminated or truncated``), as
        :class:`rlgen.runtime.buffers.RolloutBuffer` does; this is how generated code
        inserts, so a spec's ``replay.insert`` needs no ``valid`` argument.
        """
        valid = ~self._prev_done
        self._prev_done = np.logical_or(terminated, truncated)
        return self.insert(obs, action, reward, next_obs, terminated, valid)

    def record_many(self, *steps: np.ndarray) -> int:
        """:meth:`record` ``T`` vector steps given as ``[T, B, ...]`` arrays (what an actor's
        :class:`TransitionStage` sends), in order; returns how many transitions were stored."""
        return sum(self.record(*(x[t] for x in steps)) for t in range(len(steps[0])))

    def sample(self, batch_size: int, rng: np.random.Generator | None = None) -> Transitions:
        """``batch_size`` transitions drawn uniformly with replacement, fields ``[batch, ...]``."""
        return self._gather(self._indices((int(batch_size),), rng))

    def sample_many(self, n_batches: int, batch_size: int, rng: np.random.Generator | None = None) -> Transitions:
        """``n_batches`` independent minibatches stacked as ``[n_batches, batch_size, ...]``."""
        return self._gather(self._indices((int(n_batches), int(batch_size)), rng))

    def _indices(self, shape: tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return (rng or self.rng).integers(0, self.size, size=shape)

    def _gather(self, index: np.ndarray) -> Transitions:
        # ``take`` of a flat index then reshape is faster than fancy indexing with a 2-D index
        flat = index.reshape(-1)
        shape = index.shape
        return Transitions(*(x.take(flat, axis=0).reshape(*shape, *x.shape[1:]) for x in self._data))

    def transitions(self) -> Transitions:
        """Every stored transition (fields ``[size, ...]``, in storage order; copies)."""
        return Transitions(*(x[: self.size].copy() for x in self._data))


class TransitionStage:
    """An actor's side of a replay buffer that lives with the learner (``actors-learner``).

    :meth:`record` keeps the ``length`` vector steps of one collection block as they were
    inserted; :meth:`rollout` hands them over as ``[length, B, ...]`` arrays, which the
    learner passes to :meth:`ReplayBuffer.record_many` (reset steps are told apart there).
    """

    def __init__(
        self,
        length: int,
        num_envs: int,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        action_dtype: type[np.generic] | np.dtype = np.int32,
        obs_dtype: type[np.generic] | np.dtype = np.float32,
    ) -> None:
        tb = (int(length), int(num_envs))
        obs_shape, action_shape = tuple(obs_shape), tuple(action_shape)
        self._rows = (
            np.zeros(tb + obs_shape, obs_dtype),
            np.zeros(tb + action_shape, action_dtype),
            np.zeros(tb, np.float32),
            np.zeros(tb + obs_shape, obs_dtype),
            np.zeros(tb, bool),
            np.zeros(tb, bool),
        )
        self.length, self.pos = tb[0], 0

    def record(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        if self.pos == self.length:
            self.pos = 0
        for store, x in zip(self._rows, (obs, action, reward, next_obs, terminated, truncated), strict=True):
            store[self.pos] = x
        self.pos += 1

    def rollout(self) -> tuple[np.ndarray, ...]:
        """The ``length`` recorded steps: obs, action, reward, next_obs, terminated, truncated."""
        if self.pos != self.length:
            raise RuntimeError(f"transition stage holds {self.pos} of {self.length} steps")
        return self._rows
