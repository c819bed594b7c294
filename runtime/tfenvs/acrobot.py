"""Acrobot-v1 in TensorFlow, after ``gymnasium.envs.classic_control.acrobot.AcrobotEnv``.

Same dynamics ("book" equations, one classic RK4 step of ``dt = 0.2``, angles wrapped
to ``[-pi, pi]`` and velocities clipped to ``4 pi`` / ``9 pi``), reward -1 per step and 0
on the terminating one, termination when ``-cos(t1) - cos(t1 + t2) > 1``, initial state
uniform in ``[-0.1, 0.1)^4`` rounded to float32 (as gymnasium's ``reset`` does), time
limit 500. State ``[theta1, theta2, dtheta1, dtheta2]``; observation
``[cos t1, sin t1, cos t2, sin t2, dt1, dt2]``.
"""

from __future__ import annotations

from math import pi
from typing import Any

import numpy as np
import tensorflow as tf

from .base import TFEnv


class Acrobot(TFEnv):
    env_id = "Acrobot-v1"
    default_max_episode_steps = 500
    state_size = 4
    obs_size = 6
    num_actions = 3

    dt = 0.2
    LINK_LENGTH_1 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_POS_1 = 0.5
    LINK_COM_POS_2 = 0.5
    LINK_MOI = 1.0
    MAX_VEL_1 = 4 * pi
    MAX_VEL_2 = 9 * pi
    AVAIL_TORQUE = (-1.0, 0.0, +1.0)
    reset_low, reset_high = -0.1, 0.1
    # ``wrap`` subtracts/adds 2 pi one at a time, like gymnasium's loop; a velocity-clipped
    # RK4 step moves an angle by well under this many turns.
    _wrap_iterations = 4

    def _sample_reset(self, n: int) -> tf.Tensor:
        s = tf.cast(self._uniform([n, 4], self.reset_low, self.reset_high), tf.float32)
        return tf.cast(s, self.dtype)

    def _dsdt(self, s: tuple[tf.Tensor, ...], a: tf.Tensor) -> tuple[tf.Tensor, ...]:
        m1, m2 = self.LINK_MASS_1, self.LINK_MASS_2
        l1 = self.LINK_LENGTH_1
        lc1, lc2 = self.LINK_COM_POS_1, self.LINK_COM_POS_2
        I1 = I2 = self.LINK_MOI  # noqa: N806
        g = 9.8
        theta1, theta2, dtheta1, dtheta2 = s
        cos2, sin2 = tf.cos(theta2), tf.sin(theta2)
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos2) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * cos2) + I2
        phi2 = m2 * lc2 * g * tf.cos(theta1 + theta2 - pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin2
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2
            + (m1 * lc1 + m2 * l1) * g * tf.cos(theta1 - pi / 2)
            + phi2
        )
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin2 - phi2) / (
            m2 * lc2**2 + I2 - (d2 * d2) / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2

    def _wrap(self, x: tf.Tensor) -> tf.Tensor:
        lo, hi = -pi, pi
        diff = hi - lo
        for _ in range(self._wrap_iterations):
            x = tf.where(x > hi, x - diff, x)
        for _ in range(self._wrap_iterations):
            x = tf.where(x < lo, x + diff, x)
        return x

    def _dynamics(self, state: tf.Tensor, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        torque = tf.gather(tf.constant(self.AVAIL_TORQUE, self.dtype), action)
        y0 = tuple(tf.unstack(state, axis=1))
        dt = self.dt
        dt2 = dt / 2.0
        k1 = self._dsdt(y0, torque)
        k2 = self._dsdt(tuple(y + dt2 * k for y, k in zip(y0, k1, strict=True)), torque)
        k3 = self._dsdt(tuple(y + dt2 * k for y, k in zip(y0, k2, strict=True)), torque)
        k4 = self._dsdt(tuple(y + dt * k for y, k in zip(y0, k3, strict=True)), torque)
        ns = [y + dt / 6.0 * (a + 2 * b + 2 * c + d) for y, a, b, c, d in zip(y0, k1, k2, k3, k4, strict=True)]
        t1 = self._wrap(ns[0])
        t2 = self._wrap(ns[1])
        v1 = tf.clip_by_value(ns[2], -self.MAX_VEL_1, self.MAX_VEL_1)
        v2 = tf.clip_by_value(ns[3], -self.MAX_VEL_2, self.MAX_VEL_2)
        terminated = -tf.cos(t1) - tf.cos(t2 + t1) > 1.0
        reward = tf.where(terminated, 0.0, -1.0)
        return tf.stack([t1, t2, v1, v2], axis=1), reward, terminated

    def _observe(self, state: tf.Tensor) -> tf.Tensor:
        t1, t2, v1, v2 = tf.unstack(state, axis=1)
        obs = tf.stack([tf.cos(t1), tf.sin(t1), tf.cos(t2), tf.sin(t2), v1, v2], axis=1)
        return tf.cast(obs, tf.float32)

    @property
    def single_observation_space(self) -> Any:
        from gymnasium import spaces

        high = np.array([1.0, 1.0, 1.0, 1.0, self.MAX_VEL_1, self.MAX_VEL_2], dtype=np.float32)
        return spaces.Box(low=-high, high=high, dtype=np.float32)

    @property
    def single_action_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Discrete(3)
