"""A rollout cut into the chunks a recurrent learner trains on (the reference MAPPO's
``data_chunk_length``), laid as the reference lays them.

The ``B`` rows of a rollout of ``T`` steps are laid end to end (step ``t`` of row ``b`` at
position ``b*T + t``) and cut into ``S = ceil(B*T / L)`` chunks of ``L`` steps, the last one
padded with zeros that carry no weight. Each chunk is a sequence the update unrolls from a
stored state, the one the policy (or value) read at the chunk's first step while acting; where
a chunk runs on into the next row, that row's first step starts again from its own stored state
(episode starts reset it to zeros there, as anywhere). So backpropagation through time is cut
at different steps in different rows: with ``T`` not a multiple of ``L`` (26 rows of chunks of
10) the cuts move from row to row, where cutting every row at ``0, L, 2L ...`` would never let a
gradient cross those steps in any row. The reference lays its sequences so as well (and relies
on its episode-aligned rollouts to reset the state where a chunk crosses into another row);
see docs/benchmarks.md, "The reference trainer's updates replayed through rlgen".
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def chunks(steps: int, rows: int, length: int) -> int:
    """How many chunks of ``length`` steps hold ``rows`` rows of ``steps`` steps laid end to end."""
    return -(-int(steps) * int(rows) // int(length))


def to_sequences(x: tf.Tensor, length: int) -> tf.Tensor:
    """``[T, B, ...]`` to ``[L, S, ...]``: the rows laid end to end, cut into chunks, zero padded."""
    steps, rows = x.shape[0], x.shape[1]
    s = chunks(steps, rows, length)
    rest = list(range(2, len(x.shape)))
    flat = tf.reshape(tf.transpose(x, [1, 0, *rest]), [steps * rows, *x.shape[2:]])
    flat = tf.pad(flat, [[0, s * length - steps * rows]] + [[0, 0]] * len(rest))
    seqs = tf.reshape(flat, [s, length, *x.shape[2:]])
    return tf.transpose(seqs, [1, 0, *range(2, len(seqs.shape))])


def restarts(steps: int, rows: int, length: int) -> np.ndarray:
    """``[L, S]`` bool: where a sequence takes its stored state, its first step and the first
    step of every row it runs on into."""
    s = chunks(steps, rows, length)
    position = np.arange(s * length).reshape(s, length).T  # [L, S]: each step's place end to end
    return (position % length == 0) | ((position % steps == 0) & (position < steps * rows))


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
