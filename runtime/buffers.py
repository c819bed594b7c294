"""On-policy rollout storage: ``T`` steps of ``B`` environments in preallocated arrays.

Inserting is a handful of NumPy slice writes per env step (a few microseconds);
the learner converts the whole rollout to tensors once per update, so the buffer
adds no TensorFlow call per step.

The buffer follows :class:`rlgen.runtime.envs.VectorEnv`'s step convention
(gymnasium's ``NEXT_STEP`` autoreset): the step after an episode ends is a
*reset step* whose observation is the last observation of the finished episode and
whose action is ignored by the environment. The buffer marks such rows
``valid = 0`` (derived from the previous insert's ``terminated | truncated``, also
across rollouts), and the learner leaves them out of its losses. The value the
actor computed for such a row is the value of the episode's final observation,
which is exactly what a truncated episode must bootstrap from.

With ``state_shape`` (multi-agent: a centralised critic's global state) the buffer
also stores each step's ``state`` and :meth:`RolloutBuffer.rollout` returns a
:class:`StateRollout`: :class:`Rollout`'s fields with ``states`` last. Without it
nothing changes: a :class:`Rollout` of exactly eight fields.

With ``memory=(policy_size, value_size)`` (recurrent networks, runtime/recurrent.py) each
insert also takes ``first`` (the row's observation begins an episode) and the states the
policy and the value read at the step (zero-width for a side that is not recurrent), and
:meth:`RolloutBuffer.memory` returns them as a :class:`Memory`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Rollout(NamedTuple):
    """A full rollout, each field ``[T, B, ...]``; flags are float32 0/1."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    logp: np.ndarray
    values: np.ndarray


class StateRollout(NamedTuple):
    """:class:`Rollout`'s fields in its order, then ``states [T, B, *state_shape]``: what
    the value function of a centralised critic reads (a buffer built with ``state_shape``)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    logp: np.ndarray
    values: np.ndarray
    states: np.ndarray


class Memory(NamedTuple):
    """What recurrent networks read at each step of a rollout: ``first [T, B]`` (float32
    0/1) and the states ``[T, B, size]`` the policy and the value started the step from."""

    first: np.ndarray
    policy_states: np.ndarray
    value_states: np.ndarray


class RolloutBuffer:
    """Holds one rollout of ``length`` steps for ``num_envs`` environments.

    Call :meth:`insert` once per env step; when the buffer is full, :meth:`rollout`
    returns the data and the next insert starts a new rollout. With ``state_shape``
    each insert also takes the step's ``state`` and the rollout is a :class:`StateRollout`.
    """

    def __init__(
        self,
        length: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        action_dtype: type[np.generic] = np.int32,
        state_shape: tuple[int, ...] | None = None,
        obs_dtype: type[np.generic] = np.float32,
        memory: tuple[int, int] | None = None,
    ) -> None:
        if length < 1 or num_envs < 1:
            raise ValueError("length and num_envs must be >= 1")
        self.length, self.num_envs = int(length), int(num_envs)
        self.obs_shape, self.action_shape = tuple(obs_shape), tuple(action_shape)
        self.state_shape = None if state_shape is None else tuple(int(d) for d in state_shape)
        tb = (self.length, self.num_envs)
        data = Rollout(
            obs=np.zeros(tb + self.obs_shape, obs_dtype),  # uint8 images stay uint8
            actions=np.zeros(tb + self.action_shape, action_dtype),
            rewards=np.zeros(tb, np.float32),
            terminated=np.zeros(tb, np.float32),
            truncated=np.zeros(tb, np.float32),
            valid=np.zeros(tb, np.float32),
            logp=np.zeros(tb, np.float32),
            values=np.zeros(tb, np.float32),
        )
        self._data: Rollout | StateRollout = (
            data if self.state_shape is None else StateRollout(*data, np.zeros(tb + self.state_shape, np.float32))
        )
        self._memory = None
        if memory is not None:
            sizes = tuple(int(n) for n in memory)
            self._memory = Memory(np.zeros(tb, np.float32), *(np.zeros((*tb, n), np.float32) for n in sizes))
        self._prev_done = np.zeros(self.num_envs, bool)
        self.pos = 0

    @property
    def full(self) -> bool:
        return self.pos == self.length

    def insert(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        logp: np.ndarray,
        value: np.ndarray,
        state: np.ndarray | None = None,
        memory: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Store one step of every env (``obs`` is the observation the action was taken in;
        ``state``, required exactly when the buffer has a ``state_shape``, the global state then;
        ``memory``, required exactly when it stores one, ``(first, policy_state, value_state)``)."""
        if (state is None) != (self.state_shape is None):
            raise ValueError(
                "this buffer stores no state" if state is not None else "this buffer stores states: pass state"
            )
        if (memory is None) != (self._memory is None):
            raise ValueError(
                "this buffer stores no memory" if memory is not None else "this buffer stores memory: pass memory"
            )
        if self.pos == self.length:
            self.pos = 0
        t, d = self.pos, self._data
        d.obs[t] = obs
        d.actions[t] = action
        d.rewards[t] = reward
        d.terminated[t] = terminated
        d.truncated[t] = truncated
        d.valid[t] = ~self._prev_done
        d.logp[t] = logp
        d.values[t] = value
        if state is not None:
            d.states[t] = state  # type: ignore[union-attr]
        if memory is not None:
            for stored, x in zip(self._memory, memory, strict=True):  # type: ignore[arg-type]
                stored[t] = x
        self._prev_done = np.logical_or(terminated, truncated)
        self.pos = t + 1

    def rollout(self) -> Rollout | StateRollout:
        """The stored rollout (views of the buffer's arrays; valid until the next insert)."""
        if not self.full:
            raise RuntimeError(f"rollout buffer holds {self.pos} of {self.length} steps")
        return self._data

    def memory(self) -> Memory:
        """The stored :class:`Memory` (views, as :meth:`rollout`'s) of a buffer built with one."""
        if self._memory is None:
            raise RuntimeError("this buffer stores no memory (build it with memory=(policy_size, value_size))")
        self.rollout()  # full, or it says how far
        return self._memory
