"""MountainCar-v0 in TensorFlow, after ``gymnasium.envs.classic_control.mountain_car.MountainCarEnv``.

Same dynamics (velocity and position clipped, velocity zeroed at the left wall), reward
-1 per step, termination when ``position >= 0.5`` and ``velocity >= 0``, initial position
uniform in ``[-0.6, -0.4)`` with velocity 0, time limit 200. State ``[position, velocity]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .base import TFEnv


class MountainCar(TFEnv):
    env_id = "MountainCar-v0"
    default_max_episode_steps = 200
    state_size = 2
    obs_size = 2
    num_actions = 3

    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_position = 0.5
    goal_velocity = 0.0
    force = 0.001
    gravity = 0.0025
    reset_low, reset_high = -0.6, -0.4

    def _sample_reset(self, n: int) -> tf.Tensor:
        position = self._uniform([n], self.reset_low, self.reset_high)
        return tf.cast(tf.stack([position, tf.zeros_like(position)], axis=1), self.dtype)

    def _dynamics(self, state: tf.Tensor, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        position, velocity = tf.unstack(state, axis=1)
        push = tf.cast(action - 1, self.dtype) * self.force
        velocity = velocity + (push + tf.cos(3 * position) * (-self.gravity))
        velocity = tf.clip_by_value(velocity, -self.max_speed, self.max_speed)
        position = position + velocity
        position = tf.clip_by_value(position, self.min_position, self.max_position)
        at_wall = (position == self.min_position) & (velocity < 0)
        velocity = tf.where(at_wall, tf.zeros_like(velocity), velocity)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        reward = -tf.ones_like(position, tf.float32)
        return tf.stack([position, velocity], axis=1), reward, terminated

    def _observe(self, state: tf.Tensor) -> tf.Tensor:
        return tf.cast(state, tf.float32)

    @property
    def single_observation_space(self) -> Any:
        from gymnasium import spaces

        low = np.array([self.min_position, -self.max_speed], dtype=np.float32)
        high = np.array([self.max_position, self.max_speed], dtype=np.float32)
        return spaces.Box(low, high, dtype=np.float32)

    @property
    def single_action_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Discrete(3)
