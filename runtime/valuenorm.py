"""The reference MAPPO's value normalisation (marlbenchmark/on-policy ``ValueNorm``): the
value function predicts returns normalised by running statistics (see
:class:`rlgen.algorithms.mappo.learner.MAPPOLearner`)."""

from __future__ import annotations

import tensorflow as tf


class ValueNorm(tf.Module):
    """Running mean and variance of value targets (the reference MAPPO's ``ValueNorm``,
    scalar, ``per_element_update=False``): exponential averages of the batch mean and of
    the batch mean square with decay ``beta``, debiased by the average of ones, the
    variance floored at 0.01."""

    def __init__(self, beta: float = 0.99999, epsilon: float = 1e-5, name: str | None = "value_norm") -> None:
        super().__init__(name=name)
        self.beta, self.epsilon = float(beta), float(epsilon)
        self.running_mean = tf.Variable(0.0, trainable=False, name="running_mean")
        self.running_mean_sq = tf.Variable(0.0, trainable=False, name="running_mean_sq")
        self.debiasing_term = tf.Variable(0.0, trainable=False, name="debiasing_term")

    def mean_var(self) -> tuple[tf.Tensor, tf.Tensor]:
        debias = tf.maximum(self.debiasing_term, self.epsilon)
        mean = self.running_mean / debias
        var = tf.maximum(self.running_mean_sq / debias - tf.square(mean), 1e-2)
        return mean, var

    def update(self, x: tf.Tensor, weights: tf.Tensor | None = None) -> None:
        """Fold in a batch ``x`` (rows with ``weights`` 0 left out)."""
        x = tf.reshape(tf.cast(x, tf.float32), [-1])
        w = tf.ones_like(x) if weights is None else tf.reshape(tf.cast(weights, tf.float32), [-1])
        count = tf.maximum(tf.reduce_sum(w), 1.0)
        batch_mean = tf.reduce_sum(w * x) / count
        batch_sq_mean = tf.reduce_sum(w * tf.square(x)) / count
        b = self.beta
        self.running_mean.assign(self.running_mean * b + batch_mean * (1.0 - b))
        self.running_mean_sq.assign(self.running_mean_sq * b + batch_sq_mean * (1.0 - b))
        self.debiasing_term.assign(self.debiasing_term * b + (1.0 - b))

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        mean, var = self.mean_var()
        return (x - mean) / tf.sqrt(var)

    def denormalize(self, x: tf.Tensor) -> tf.Tensor:
        mean, var = self.mean_var()
        return x * tf.sqrt(var) + mean
