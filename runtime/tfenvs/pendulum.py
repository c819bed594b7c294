"""Pendulum-v1 in TensorFlow, after ``gymnasium.envs.classic_control.pendulum.PendulumEnv``.

Same dynamics (semi-implicit Euler with ``dt = 0.05``, speed clipped to 8, ``g = 10``),
torque clipped to ``[-2, 2]``, reward ``-(normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2)``
from the state before the step, never terminates, initial state uniform in
``[-pi, pi) x [-1, 1)``, time limit 200. State ``[theta, theta_dot]``; observation
``[cos theta, sin theta, theta_dot]``. Actions are float32 ``[num_envs, 1]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from .base import TFEnv


class Pendulum(TFEnv):
    env_id = "Pendulum-v1"
    default_max_episode_steps = 200
    state_size = 2
    obs_size = 3
    num_actions = None
    action_size = 1

    max_speed = 8.0
    max_torque = 2.0
    dt = 0.05
    g = 10.0
    m = 1.0
    l = 1.0  # noqa: E741
    reset_high = (math.pi, 1.0)

    def _sample_reset(self, n: int) -> tf.Tensor:
        high = np.array(self.reset_high)
        return tf.cast(self._uniform([n, 2], -high, high), self.dtype)

    def _dynamics(self, state: tf.Tensor, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        th, thdot = tf.unstack(state, axis=1)
        g, m, l, dt = self.g, self.m, self.l, self.dt  # noqa: E741
        # gymnasium keeps the (float32) torque in float32 until it meets the float64 state.
        u = tf.clip_by_value(action[:, 0], -self.max_torque, self.max_torque)
        u_cost = tf.cast(0.001 * (u * u), self.dtype)
        u_acc = tf.cast(3.0 / (m * l**2) * u, self.dtype)
        norm = tf.math.floormod(th + math.pi, 2 * math.pi) - math.pi
        costs = norm * norm + 0.1 * (thdot * thdot) + u_cost
        newthdot = thdot + (3 * g / (2 * l) * tf.sin(th) + u_acc) * dt
        newthdot = tf.clip_by_value(newthdot, -self.max_speed, self.max_speed)
        newth = th + newthdot * dt
        terminated = tf.zeros_like(th, tf.bool)
        return tf.stack([newth, newthdot], axis=1), -costs, terminated

    def _observe(self, state: tf.Tensor) -> tf.Tensor:
        th, thdot = tf.unstack(state, axis=1)
        return tf.cast(tf.stack([tf.cos(th), tf.sin(th), thdot], axis=1), tf.float32)

    @property
    def single_observation_space(self) -> Any:
        from gymnasium import spaces

        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        return spaces.Box(low=-high, high=high, dtype=np.float32)

    @property
    def single_action_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Box(low=-self.max_torque, high=self.max_torque, shape=(1,), dtype=np.float32)
