"""CartPole-v1 in TensorFlow, after ``gymnasium.envs.classic_control.cartpole.CartPoleEnv``.

Same dynamics (explicit Euler, the same expression order), reward 1 every step including
the terminating one, termination when ``|x| > 2.4`` or ``|theta| > 12 degrees``, initial
state uniform in ``[-0.05, 0.05)^4``, time limit 500. State ``[x, x_dot, theta, theta_dot]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from .base import TFEnv


class CartPole(TFEnv):
    env_id = "CartPole-v1"
    default_max_episode_steps = 500
    state_size = 4
    obs_size = 4
    num_actions = 2

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    reset_low, reset_high = -0.05, 0.05

    def _sample_reset(self, n: int) -> tf.Tensor:
        return tf.cast(self._uniform([n, 4], self.reset_low, self.reset_high), self.dtype)

    def _dynamics(self, state: tf.Tensor, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        x, x_dot, theta, theta_dot = tf.unstack(state, axis=1)
        force = tf.where(action == 1, self.force_mag, -self.force_mag)
        force = tf.cast(force, self.dtype)
        costheta = tf.cos(theta)
        sintheta = tf.sin(theta)
        temp = (force + self.polemass_length * tf.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * tf.square(costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        terminated = (
            (x < -self.x_threshold)
            | (x > self.x_threshold)
            | (theta < -self.theta_threshold_radians)
            | (theta > self.theta_threshold_radians)
        )
        reward = tf.ones_like(x, tf.float32)
        return tf.stack([x, x_dot, theta, theta_dot], axis=1), reward, terminated

    def _observe(self, state: tf.Tensor) -> tf.Tensor:
        return tf.cast(state, tf.float32)

    @property
    def single_observation_space(self) -> Any:
        from gymnasium import spaces

        high = np.array([self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2, np.inf], np.float32)
        return spaces.Box(-high, high, dtype=np.float32)

    @property
    def single_action_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Discrete(2)
