"""Action distributions built inside graphs from network outputs.

Plain Python classes: a policy constructs one per call from its network's output.
Sampling takes an explicit ``tf.random.Generator`` so it is reproducible and
works under ``jit_compile``.
"""

from __future__ import annotations

import math
from typing import Protocol

import tensorflow as tf

LOG_2PI = math.log(2.0 * math.pi)


class Distribution(Protocol):
    """What a policy's distribution offers (one distribution per batch row)."""

    def sample(self, generator: tf.random.Generator) -> tf.Tensor: ...

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor: ...

    def entropy(self) -> tf.Tensor: ...

    def mode(self) -> tf.Tensor: ...


class Categorical:
    """Categorical over ``n`` actions from unnormalised ``logits[B, n]``; actions are int32."""

    def __init__(self, logits: tf.Tensor) -> None:
        self.logits = logits
        self.log_probs = tf.nn.log_softmax(logits)

    def sample(self, generator: tf.random.Generator) -> tf.Tensor:
        """Gumbel-max sampling: ``argmax(logits + Gumbel noise)``."""
        u = generator.uniform(tf.shape(self.logits), minval=1e-20, maxval=1.0)
        return tf.argmax(self.logits - tf.math.log(-tf.math.log(u)), axis=-1, output_type=tf.int32)

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        return tf.gather(self.log_probs, tf.cast(actions, tf.int32), batch_dims=1)

    def entropy(self) -> tf.Tensor:
        return -tf.reduce_sum(tf.exp(self.log_probs) * self.log_probs, axis=-1)

    def mode(self) -> tf.Tensor:
        return tf.argmax(self.logits, axis=-1, output_type=tf.int32)


class DiagGaussian:
    """Diagonal Gaussian with ``mean[B, d]`` and ``log_std[d]`` (state-independent)."""

    def __init__(self, mean: tf.Tensor, log_std: tf.Tensor) -> None:
        self.mean = mean
        self.log_std = tf.broadcast_to(log_std, tf.shape(mean))

    def sample(self, generator: tf.random.Generator) -> tf.Tensor:
        return self.mean + tf.exp(self.log_std) * generator.normal(tf.shape(self.mean))

    def log_prob(self, actions: tf.Tensor) -> tf.Tensor:
        z = (actions - self.mean) * tf.exp(-self.log_std)
        return tf.reduce_sum(-0.5 * tf.square(z) - self.log_std - 0.5 * LOG_2PI, axis=-1)

    def entropy(self) -> tf.Tensor:
        return tf.reduce_sum(0.5 + 0.5 * LOG_2PI + self.log_std, axis=-1)

    def mode(self) -> tf.Tensor:
        return self.mean
