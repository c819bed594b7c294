"""Action-value component for discrete actions: ``Q(obs) -> [B, n_actions]`` and ε-greedy acting.

:class:`QNetwork` wraps a network from :func:`rlgen.runtime.networks.build_network`
whose outputs are the action values. Acting is ε-greedy: each env independently
takes a uniformly random action with probability ``epsilon`` (drawn from the
component's own seeded ``tf.random.Generator``), else the greedy one.
Stable-Baselines3 draws one coin for the whole batch of envs; with one env the two
are the same. :class:`Exploration` is SB3's linear ε schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from .tfutil import numpy_caller


@dataclass(frozen=True)
class Exploration:
    """ε moving linearly from ``initial`` to ``final`` over the first ``fraction`` of
    training, then constant (SB3's ``get_linear_fn(initial, final, fraction)``); before
    ``random_until`` ε is 1, every action uniformly random (SB3's DQN before
    ``learning_starts``, whatever the schedule says there).

    Called with ``progress`` = steps taken / total steps, in [0, 1].
    """

    initial: float = 1.0
    final: float = 0.05
    fraction: float = 0.1
    random_until: float = 0.0

    def __call__(self, progress: float) -> float:
        if progress < self.random_until:
            return 1.0
        if self.fraction <= 0.0 or progress > self.fraction:
            return float(self.final)
        return float(self.initial + max(progress, 0.0) * (self.final - self.initial) / self.fraction)

    def epsilon(self, progress: tf.Tensor) -> tf.Tensor:
        """The same schedule in TensorFlow ops (for a compiled acting step)."""
        progress = tf.cast(progress, tf.float32)
        if self.fraction <= 0.0:
            eps = tf.constant(self.final, tf.float32)
        else:
            done = tf.clip_by_value(progress / self.fraction, 0.0, 1.0)
            eps = self.initial + done * (self.final - self.initial)
        if self.random_until > 0.0:
            eps = tf.where(progress < self.random_until, 1.0, eps)
        return eps

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> Exploration:
        """From a spec's ``exploration`` mapping ``{initial, final, fraction}`` (missing keys: defaults)."""
        spec = spec or {}
        return cls(
            float(spec.get("initial", cls.initial)),
            float(spec.get("final", cls.final)),
            float(spec.get("fraction", cls.fraction)),
            float(spec.get("random_until", cls.random_until)),
        )


class QNetwork(tf.Module):
    """Action values over ``network`` (``[B, *obs_shape] -> [B, num_actions]``)."""

    def __init__(self, network: tf.Module, num_actions: int, seed: int = 0, name: str | None = "q") -> None:
        super().__init__(name=name)
        if num_actions < 1:
            raise ValueError("num_actions must be >= 1")
        self.network = network
        self.num_actions = int(num_actions)
        self.generator = tf.random.Generator.from_seed(seed)

    def values(self, obs: tf.Tensor) -> tf.Tensor:
        """``Q(obs, ·)``, ``[B, num_actions]`` float32."""
        return self.network(obs)

    def __call__(self, obs: tf.Tensor) -> tf.Tensor:
        return self.values(obs)

    def greedy(self, obs: tf.Tensor) -> tf.Tensor:
        """``argmax_a Q(obs, a)``, ``[B]`` int32 (ties: the lowest action)."""
        return tf.argmax(self.values(obs), axis=-1, output_type=tf.int32)

    def act(self, obs: tf.Tensor, epsilon: tf.Tensor | float = 0.0) -> tf.Tensor:
        """ε-greedy actions ``[B]`` int32: per env, uniform random with probability ``epsilon``."""
        greedy = self.greedy(obs)
        epsilon = tf.cast(epsilon, tf.float32)
        # one draw per env: given u < epsilon, u / epsilon is uniform on [0, 1) and picks the action
        u = self.generator.uniform(tf.shape(greedy))
        pick = tf.cast(tf.math.floor(u / tf.maximum(epsilon, 1e-30) * self.num_actions), tf.int32)
        random = tf.minimum(pick, self.num_actions - 1)
        return tf.where(u < epsilon, random, greedy)

    def policy(self, epsilon: float = 0.0) -> QPolicy:
        """This network as a policy with the interface of :class:`rlgen.runtime.policies.Policy`
        (for evaluation and the exported SavedModel)."""
        return QPolicy(self, epsilon)


class QPolicy(tf.Module):
    """``act(obs, deterministic) -> (action,)`` of a :class:`QNetwork`: greedy when
    deterministic, else ε-greedy with a fixed ``epsilon``."""

    def __init__(self, q: QNetwork, epsilon: float = 0.0) -> None:
        super().__init__(name="q_policy")
        self.q, self.epsilon = q, float(epsilon)

    def act(self, obs: tf.Tensor, deterministic: bool = False) -> tuple[tf.Tensor]:
        return (self.q.greedy(obs) if deterministic else self.q.act(obs, self.epsilon),)


class QActor:
    """Compiled acting: NumPy ``(obs[B, *obs_shape], epsilon)`` -> NumPy ``action[B]`` int32.

    One fast-path call per env step (see :func:`rlgen.runtime.tfutil.numpy_caller`);
    :meth:`greedy` is the deterministic variant for evaluation (batch of any size).
    """

    def __init__(self, q: QNetwork, obs_shape: tuple[int, ...], jit_compile: bool = True) -> None:
        obs_spec = tf.TensorSpec([None, *obs_shape], tf.float32, name="obs")
        eps_spec = tf.TensorSpec([], tf.float32, name="epsilon")

        @tf.function(input_signature=[obs_spec, eps_spec], jit_compile=jit_compile, autograph=False)
        def act(obs: tf.Tensor, epsilon: tf.Tensor) -> tf.Tensor:
            return q.act(obs, epsilon)

        @tf.function(input_signature=[obs_spec], jit_compile=jit_compile, autograph=False)
        def greedy(obs: tf.Tensor) -> tf.Tensor:
            return q.greedy(obs)

        self.act_function, self.greedy_function = act, greedy
        self._act = numpy_caller(act)
        self._greedy = numpy_caller(greedy)

    def __call__(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        return self._act(obs, np.float32(epsilon))[0]

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        return self._greedy(obs)[0]

    def greedy_fn(self) -> Callable[[np.ndarray], np.ndarray]:
        """``greedy`` as a plain function (e.g. for :func:`rlgen.runtime.evaluation.episodes.evaluate`)."""
        return self.greedy


def make_q_actor(q: QNetwork, obs_shape: tuple[int, ...], jit_compile: bool = True) -> QActor:
    """Build the compiled ε-greedy / greedy acting calls (see :class:`QActor`)."""
    return QActor(q, tuple(obs_shape), jit_compile)
