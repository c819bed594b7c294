"""Optimisers, gradient clipping and schedules over plain ``tf.Variable``s.

The optimisers follow PyTorch's update rules (which Stable-Baselines3 uses, and
from which the RL Zoo's tuned hyper-parameters come), keep their slots in
``tf.Variable``s created up front (so they are checkpointable and can be used
inside ``tf.function`` / XLA), and take the learning rate as a tensor per step
so a schedule can drive it from inside the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf


def _slots(variables: Sequence[tf.Variable], name: str, fill: Any = tf.zeros_like) -> list[tf.Variable]:
    return [tf.Variable(fill(v), trainable=False, name=f"{name}_{i}") for i, v in enumerate(variables)]


class Adam(tf.Module):
    """Adam as ``torch.optim.Adam`` (bias-corrected; ``eps`` added after the sqrt)."""

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"params"})

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
        name: str | None = "adam",
    ) -> None:
        super().__init__(name=name)
        self.params = list(variables)
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)
        self.step = tf.Variable(0.0, trainable=False, name="step")
        self.m = _slots(self.params, "m")
        self.v = _slots(self.params, "v")

    def apply(self, grads: Sequence[tf.Tensor], lr: tf.Tensor | float) -> None:
        """One update of every variable with its gradient at learning rate ``lr``."""
        step = self.step.assign_add(1.0)
        lr = tf.cast(lr, tf.float32)
        step_size = lr / (1.0 - tf.pow(self.beta1, step))
        root_correction = tf.sqrt(1.0 - tf.pow(self.beta2, step))
        for var, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            m_t = m.assign(self.beta1 * m + (1.0 - self.beta1) * g)
            v_t = v.assign(self.beta2 * v + (1.0 - self.beta2) * tf.square(g))
            var.assign_sub(step_size * m_t / (tf.sqrt(v_t) / root_correction + self.eps))


class RMSprop(tf.Module):
    """RMSprop as ``torch.optim.RMSprop``: ``v = a*v + (1-a)*g^2; p -= lr*g/(sqrt(v)+eps)``.

    ``tf_like``: as TensorFlow 1's ``RMSPropOptimizer`` (Stable-Baselines3's ``RMSpropTFLike``,
    which the RL Zoo's A2C Atari settings use): ``v`` starts at ones rather than zeros and
    ``eps`` is added inside the square root, ``p -= lr*g/sqrt(v+eps)``.
    """

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"params"})

    def __init__(
        self,
        variables: Sequence[tf.Variable],
        alpha: float = 0.99,
        eps: float = 1e-8,
        tf_like: bool = False,
        name: str | None = "rmsprop",
    ) -> None:
        super().__init__(name=name)
        self.params = list(variables)
        self.alpha, self.eps, self.tf_like = float(alpha), float(eps), bool(tf_like)
        self.step = tf.Variable(0.0, trainable=False, name="step")
        self.v = _slots(self.params, "v", tf.ones_like if self.tf_like else tf.zeros_like)

    def apply(self, grads: Sequence[tf.Tensor], lr: tf.Tensor | float) -> None:
        """One update of every variable with its gradient at learning rate ``lr``."""
        self.step.assign_add(1.0)
        lr = tf.cast(lr, tf.float32)
        for var, g, v in zip(self.params, grads, self.v, strict=True):
            v_t = v.assign(self.alpha * v + (1.0 - self.alpha) * tf.square(g))
            denominator = tf.sqrt(v_t + self.eps) if self.tf_like else tf.sqrt(v_t) + self.eps
            var.assign_sub(lr * g / denominator)


Optimizer = Adam | RMSprop


def build_optimizer(config: Mapping[str, Any], variables: Sequence[tf.Variable]) -> Optimizer:
    """From a spec's ``optimizer`` entry: ``{kind: adam, eps}`` or ``{kind: rmsprop, alpha, eps, tf_like}``."""
    kind = config.get("kind", "adam")
    if kind == "adam":
        return Adam(
            variables,
            beta1=config.get("beta1", 0.9),
            beta2=config.get("beta2", 0.999),
            eps=config.get("eps", 1e-8),
        )
    if kind == "rmsprop":
        return RMSprop(
            variables,
            alpha=config.get("alpha", 0.99),
            eps=config.get("eps", 1e-8),
            tf_like=config.get("tf_like", False),
        )
    raise ValueError(f"unknown optimizer kind {kind!r}")


def clip_by_global_norm(grads: Sequence[tf.Tensor], max_norm: float) -> tuple[list[tf.Tensor], tf.Tensor]:
    """Scale gradients as ``torch.nn.utils.clip_grad_norm_``; returns them and the norm.

    The scale is ``min(1, max_norm / (norm + 1e-6))``.
    """
    norm = tf.linalg.global_norm(list(grads))
    scale = tf.minimum(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


@dataclass(frozen=True)
class Linear:
    """A rate moving linearly from ``start`` (progress 0) to ``end`` (progress 1)."""

    start: float
    end: float

    def __call__(self, progress: tf.Tensor | float) -> tf.Tensor:
        p = tf.clip_by_value(tf.cast(progress, tf.float32), 0.0, 1.0)
        return self.start + (self.end - self.start) * p


Rate = float | Linear


def as_schedule(rate: Rate | Mapping[str, Any]) -> Linear:
    """A number (constant), a :class:`Linear`, or a spec mapping ``{schedule: linear, start, end}``."""
    if isinstance(rate, Linear):
        return rate
    if isinstance(rate, Mapping):
        kind = rate.get("schedule", "linear")
        if kind == "constant":
            return Linear(float(rate["value"]), float(rate["value"]))
        if kind != "linear":
            raise ValueError(f"unknown schedule {kind!r}")
        return Linear(float(rate["start"]), float(rate["end"]))
    return Linear(float(rate), float(rate))
