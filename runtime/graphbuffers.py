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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import tensorflow as tf

from .buffers import Rollout, StateRollout

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
    ) -> Rows:
        """Rows with step ``t`` of every env written (``obs``: the observation acted on;
        ``state``: the global state, required exactly when the buffer has a ``state_shape``)."""
        if (state is None) != (self.state_shape is None):
            raise ValueError(
                "this buffer stores no state" if state is not None else "this buffer stores states: pass state"
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
        arrays = tuple(a.write(t, x) for a, x in zip(rows.arrays, parts, strict=True))
        return Rows(arrays, tf.logical_or(terminated, truncated))

    def end(self, rows: Rows) -> Rollout | StateRollout:
        """The written rollout as ``[T, B, ...]`` tensors; remembers the last row's episode ends."""
        self.prev_done.assign(rows.prev_done)
        kind = Rollout if self.state_shape is None else StateRollout
        return kind(*(a.stack() for a in rows.arrays))


__all__ = ["GraphRolloutBuffer", "Rows"]
