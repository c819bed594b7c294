"""A rollout cut into the chunks a recurrent learner trains on (the reference MAPPO's
``data_chunk_length``).

A rollout of ``T`` steps of ``B`` rows is padded to ``C = ceil(T / L)`` whole chunks of ``L``
steps; chunk ``c`` of row ``b`` is sequence ``s = c*B + b``: steps ``c*L .. c*L + L - 1`` of that
row. A chunk never crosses a row or a rollout, so a sequence's first state is the state the
policy (or value) read at the chunk's first step, stored while acting; episode starts inside a
chunk reset the state there, as while acting. Padding steps are zeros and carry no weight.
"""

from __future__ import annotations

import tensorflow as tf


def chunks(steps: int, length: int) -> int:
    """How many chunks of ``length`` steps hold ``steps`` (the last one padded)."""
    return -(-int(steps) // int(length))


def to_sequences(x: tf.Tensor, length: int) -> tf.Tensor:
    """``[T, B, ...]`` to ``[L, C*B, ...]``: the rollout's chunks as sequences, zero padded."""
    steps, rows = x.shape[0], x.shape[1]
    c = chunks(steps, length)
    pad = [[0, c * length - steps]] + [[0, 0]] * (len(x.shape) - 1)
    x = tf.reshape(tf.pad(x, pad), [c, length, rows, *x.shape[2:]])
    x = tf.transpose(x, [1, 0, 2, *range(3, len(x.shape))])
    return tf.reshape(x, [length, c * rows, *x.shape[3:]])


def sequence_starts(states: tf.Tensor, length: int) -> tf.Tensor:
    """``[T, B, size]`` stored states to ``[C*B, size]``: each sequence's state before its first step."""
    starts = states[::length]
    return tf.reshape(starts, [-1, states.shape[-1]])


def sequence_minibatches(
    generator: tf.random.Generator, epochs: int, sequences: int, per_minibatch: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """``[epochs * M, per_minibatch]`` sequence indices (one permutation per epoch, padded
    with sequence 0 to whole minibatches) and the matching 0/1 weights."""
    m = -(-sequences // per_minibatch)
    pad = m * per_minibatch - sequences
    perm = tf.argsort(generator.uniform([epochs, sequences]), axis=1, stable=True)
    perm = tf.concat([perm, tf.zeros([epochs, pad], tf.int32)], axis=1)
    weight = tf.concat([tf.ones([epochs, sequences]), tf.zeros([epochs, pad])], axis=1)
    return tf.reshape(perm, [epochs * m, per_minibatch]), tf.reshape(weight, [epochs * m, per_minibatch])
