"""The rollout buffer of a whole-loop graph: rows written inside a ``tf.while_loop``.

Under the ``single`` policy with an in-graph env (``env: {backend: tensorflow}``) a
whole iteration is one ``tf.function``; there is no host step at which a NumPy buffer
could store a row. :class:`GraphRolloutBuffer` is the same buffer as
:class:`rlgen.runtime.buffers.RolloutBuffer` in functional form: :meth:`begin` gives
the empty rows (``TensorArray`` s, which XLA compiles), the loop body threads them
through :meth:`insert`, and :meth:`end` stacks them into a
:class:`~rlgen.runtime.buffers.Rollout` of ``[T, B, ...]`` tensors for the learner.

``valid`` follows the same convention as the NumPy buffer: a row right after an
episode end (a reset step) is ``valid = 0``. Whether the previous row ended an episode
is carried from one rollout to the next in :attr:`GraphRolloutBuffer.prev_done`.

With ``state_shape`` the rows also hold each step's ``state`` and :meth:`end` gives a
:class:`~rlgen.runtime.buffers.StateRollout` (``states`` last), as the NumPy buffer does.
With ``memory=(policy_size, value_size)`` (recurrent networks) each insert also takes
``(first, policy_state, value_state)`` and :meth:`memory` gives them as a
:class:`~rlgen.runtime.buffers.Memory` of ``[T, B, ...]`` tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import tensorflow as tf

from .buffers import Memory, Rollout, StateRollout

_FLOAT_FIELDS = ("rewards", "terminated", "truncated", "valid", "logp", "values")


class Rows(NamedTuple):
    """The loop state of a rollout being written: one ``TensorArray`` per field, and
    whether each env ended an episode at the previous row."""

    arrays: tuple[tf.TensorArray, ...]  # in Rollout's (StateRollout's) field order
    prev_done: tf.Tensor


class GraphRolloutBuffer(tf.Module):
    """``length`` steps of ``num_envs`` envs, written by a traced loop."""

    def __init__(
        self,
        length: int,
        num_envs: int,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        action_dtype: tf.DType | str = tf.int32,
        name: str | None = None,
        state_shape: Sequence[int] | None = None,
        memory: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(name=name)
        if length < 1 or num_envs < 1:
            raise ValueError("length and num_envs must be >= 1")
        self.length, self.num_envs = int(length), int(num_envs)
        b = self.num_envs
        self._shapes = {
            "obs": ([b, *obs_shape], tf.float32),
            "actions": ([b, *action_shape], tf.as_dtype(action_dtype)),
            **{f: ([b], tf.float32) for f in _FLOAT_FIELDS},
        }
        self.state_shape = None if state_shape is None else tuple(int(d) for d in state_shape)
        self._fields = Rollout._fields
        if self.state_shape is not None:
            self._shapes["states"] = ([b, *self.state_shape], tf.float32)
            self._fields = StateRollout._fields
        self.memory_sizes = None if memory is None else tuple(int(n) for n in memory)
        if self.memory_sizes is not None:
            self._shapes["first"] = ([b], tf.float32)
            self._shapes["policy_states"] = ([b, self.memory_sizes[0]], tf.float32)
            self._shapes["value_states"] = ([b, self.memory_sizes[1]], tf.float32)
            self._fields = (*self._fields, *Memory._fields)
        self.prev_done = tf.Variable(tf.zeros([b], tf.bool), trainable=False, name="prev_done")

    def begin(self) -> Rows:
        """Empty rows for one rollout."""
        arrays = tuple(
            tf.TensorArray(dtype, size=self.length, element_shape=shape, name=field)
            for field, (shape, dtype) in ((f, self._shapes[f]) for f in self._fields)
        )
        return Rows(arrays, self.prev_done.read_value())

    def insert(
        self,
        rows: Rows,
        t: tf.Tensor,
        obs: tf.Tensor,
        action: tf.Tensor,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        logp: tf.Tensor | float = 0.0,
        value: tf.Tensor | float = 0.0,
        state: tf.Tensor | None = None,
        memory: tuple[tf.Tensor, tf.Tensor, tf.Tensor] | None = None,
    ) -> Rows:
        """Rows with step ``t`` of every env written (``obs``: the observation acted on;
        ``state``: the global state, required exactly when the buffer has a ``state_shape``;
        ``memory``: ``(first, policy_state, value_state)``, exactly when it stores memory)."""
        if (state is None) != (self.state_shape is None):
            raise ValueError(
                "this buffer stores no state" if state is not None else "this buffer stores states: pass state"
            )
        if (memory is None) != (self.memory_sizes is None):
            raise ValueError(
                "this buffer stores no memory" if memory is not None else "this buffer stores memory: pass memory"
            )
        b = self.num_envs
        terminated, truncated = tf.cast(terminated, tf.bool), tf.cast(truncated, tf.bool)
        row = Rollout(
            obs=obs,
            actions=tf.cast(action, self._shapes["actions"][1]),
            rewards=tf.cast(reward, tf.float32),
            terminated=tf.cast(terminated, tf.float32),
            truncated=tf.cast(truncated, tf.float32),
            valid=tf.cast(tf.logical_not(rows.prev_done), tf.float32),
            logp=tf.broadcast_to(tf.cast(logp, tf.float32), [b]),
            values=tf.broadcast_to(tf.cast(value, tf.float32), [b]),
        )
        parts = tuple(row) if state is None else (*row, tf.cast(state, tf.float32))
        parts += () if memory is None else tuple(tf.cast(x, tf.float32) for x in memory)
        arrays = tuple(a.write(t, x) for a, x in zip(rows.arrays, parts, strict=True))
        return Rows(arrays, tf.logical_or(terminated, truncated))

    def end(self, rows: Rows) -> Rollout | StateRollout:
        """The written rollout as ``[T, B, ...]`` tensors; remembers the last row's episode ends."""
        self.prev_done.assign(rows.prev_done)
        kind = Rollout if self.state_shape is None else StateRollout
        return kind(*(a.stack() for a in rows.arrays[: len(kind._fields)]))

    def memory(self, rows: Rows) -> Memory:
        """The written memory (a buffer built with ``memory``) as ``[T, B, ...]`` tensors."""
        if self.memory_sizes is None:
            raise RuntimeError("this buffer stores no memory (build it with memory=(policy_size, value_size))")
        return Memory(*(a.stack() for a in rows.arrays[-3:]))


__all__ = ["GraphRolloutBuffer", "Rows"]
