"""mpe2's ``simple_spread_v3`` in TensorFlow: ``B`` env copies of ``N`` agents and ``N`` landmarks.

After ``mpe2.simple_spread`` and ``mpe2._mpe_utils.core`` (version 1.1.1), discrete actions:

- reset: agent positions ``U(-1, 1)^2``, velocities 0, landmark positions ``U(-1, 1)^2``
  (``reward="reference"``: ``0.8 * U(-1, 1)^2``, as the reference MAPPO's scenario).
- action ``a`` in ``[0, 5)``: force ``5 * (0, -x, +x, -y, +y)[a]`` (no-op, left, right, down, up).
- contact force between every two agents (landmarks do not collide):
  ``1e2 * (p_i - p_j) / |p_i - p_j| * softplus(-(|p_i - p_j| - 0.3) / 1e-3) * 1e-3`` on agent ``i``.
- integration (dt 0.1, damping 0.25, mass 1, no speed limit): ``p += v * dt`` with the old
  velocity, then ``v = v * 0.75 + force * dt``.
- observation of agent ``i`` (``O = 6N``, 18 for N=3): own velocity, own position, every
  landmark's position relative to it, every other agent's position relative to it (in
  agent order), then ``2 (N-1)`` zeros (the silent agents' communication).
- reward, on the positions after the step: ``global = -sum_l min_a |p_a - l|``,
  ``local_i = -(number of other agents within 0.3 of agent i)``;
  ``reward="mpe2"``: ``local_i * local_ratio + global * (1 - local_ratio)``;
  ``reward="reference"`` (marlbenchmark/on-policy's ``simple_spread`` with ``shared_reward``):
  ``r_i = global + local_i - 1`` (its collision count includes the agent itself), and every
  agent receives ``sum_i r_i``.
- truncation after ``max_cycles`` steps (25); never terminated.
- ``physics="mpe"``: the original MPE's integration (velocity first, then the position from the
  new velocity), which the reference MAPPO's env keeps; mpe2 (the default) moves by the old one.

Folded layout (row ``b*N + i`` is agent ``i`` of env copy ``b``): ``obs [B*N, O]`` float32,
``reward [B*N]`` float32, ``terminated``/``truncated`` ``[B*N]`` bool (episode-level flags on
each of the env's rows), actions int ``[B*N]``. :meth:`TFSpread.global_state` is mpe2's
``state()`` (the N observations concatenated, ``[B*N, N*O]``, the same on the env's N rows).
Step/autoreset convention, seeding and episode ring as :class:`~rlgen.runtime.tfenvs.base.TFEnv`
(``TFEnv.state`` is the physical state variable, hence ``global_state`` for mpe2's ``state()``);
episode returns are the mean over agents of each agent's return.

Physical state per env copy (``state_size = 6N``, :meth:`TFSpread.pack_state`):
``[agent positions (2N), agent velocities (2N), landmark positions (2N)]``, each ``(x, y)`` per entity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ..tfenvs.base import TFEnv

REWARDS = ("mpe2", "reference")
#: How a step integrates: mpe2's explicit Euler (position from the old velocity) or the original MPE's
#: semi-implicit Euler (velocity first), which the reference MAPPO's env keeps.
PHYSICS = ("mpe2", "mpe")


class TFSpread(TFEnv):
    """``num_envs`` copies of simple_spread with ``N`` agents, stepped with TensorFlow ops."""

    env_id = "simple_spread_v3"
    default_max_episode_steps = 25
    num_actions = 5
    dim_c = 2  # communication channel width (zeros: the agents are silent)

    dt = 0.1
    damping = 0.25
    contact_force = 1e2
    contact_margin = 1e-3
    agent_size = 0.15
    sensitivity = 5.0
    landmark_scale = {"mpe2": 1.0, "reference": 0.8}

    def __init__(
        self,
        num_envs: int,
        N: int = 3,  # noqa: N803 (mpe2's keyword)
        local_ratio: float = 0.5,
        max_cycles: int = 25,
        reward: str = "mpe2",
        physics: str = "mpe2",
        seed: int = 0,
        dtype: tf.DType | str = tf.float64,
        episode_capacity: int | None = None,
        reset_draws: int | None = None,
        name: str | None = None,
    ) -> None:
        if N < 1:
            raise ValueError(f"N must be positive, got {N}")
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio is a proportion in [0, 1], got {local_ratio}")
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {reward!r}")
        if physics not in PHYSICS:
            raise ValueError(f"physics must be one of {', '.join(PHYSICS)}, got {physics!r}")
        self.physics = physics
        self.num_agents = int(N)
        self.num_landmarks = int(N)
        self.local_ratio = float(local_ratio)
        self.reward_kind = reward
        self.state_size = 6 * self.num_agents
        self.obs_size = 4 + 2 * self.num_landmarks + (2 + self.dim_c) * (self.num_agents - 1)
        super().__init__(
            num_envs,
            seed=seed,
            max_episode_steps=max_cycles,
            dtype=dtype,
            episode_capacity=episode_capacity,
            reset_draws=reset_draws,
            name=name,
        )
        n = self.num_agents
        # row i * N + j of the N*N pairs for every other agent j of agent i, in agent order
        self._others = np.array([i * n + j for i in range(n) for j in range(n) if j != i], np.int32)
        self._forces = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.float64) * self.sensitivity

    @property
    def num_rows(self) -> int:
        """``B * N``: rows of the folded batch."""
        return self.num_envs * self.num_agents

    @property
    def possible_agents(self) -> list[str]:
        return [f"agent_{i}" for i in range(self.num_agents)]

    @property
    def state_width(self) -> int:
        """Width of :meth:`global_state`: ``N * O``."""
        return self.num_agents * self.obs_size

    # ----------------------------------------------------------------- state layout

    def pack_state(self, agent_pos: Any, agent_vel: Any, landmark_pos: Any) -> tf.Tensor:
        """Physical states ``[B, 6N]`` from positions/velocities ``[B, N, 2]`` and landmarks ``[B, N, 2]``."""
        b = self.num_envs
        parts = [tf.reshape(tf.cast(x, self.dtype), [b, -1]) for x in (agent_pos, agent_vel, landmark_pos)]
        return tf.concat(parts, axis=1)

    def unpack_state(self, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``agent_pos, agent_vel, landmark_pos``, each ``[B, N, 2]``, of physical states ``[B, 6N]``."""
        n, m = self.num_agents, self.num_landmarks
        pos = tf.reshape(state[:, : 2 * n], [self.num_envs, n, 2])
        vel = tf.reshape(state[:, 2 * n : 4 * n], [self.num_envs, n, 2])
        landmarks = tf.reshape(state[:, 4 * n : 4 * n + 2 * m], [self.num_envs, m, 2])
        return pos, vel, landmarks

    # ----------------------------------------------------------------- TFEnv hooks

    def _sample_reset(self, n: int) -> tf.Tensor:
        k = 2 * self.num_agents
        u = self._uniform([n, 2 * k], -1.0, 1.0)
        pos, landmarks = u[:, :k], u[:, k:] * self.landmark_scale[self.reward_kind]
        return tf.cast(tf.concat([pos, tf.zeros_like(pos), landmarks], axis=1), self.dtype)

    def _prepare_action(self, action: Any) -> tf.Tensor:
        return tf.reshape(tf.cast(action, tf.int32), [self.num_envs, self.num_agents])

    def _pairs(self, pos: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``delta [B,N,N,2]`` (``p_i - p_j``), distances ``[B,N,N]`` (1 on the diagonal), off-diagonal mask."""
        delta = pos[:, :, None, :] - pos[:, None, :, :]
        other = tf.logical_not(tf.eye(self.num_agents, dtype=tf.bool))[None]
        dist = tf.sqrt(tf.reduce_sum(tf.square(delta), axis=-1))
        return delta, tf.where(other, dist, tf.ones_like(dist)), other

    def _dynamics(self, state: tf.Tensor, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        pos, vel, landmarks = self.unpack_state(state)
        force = tf.gather(tf.constant(self._forces, self.dtype), action)  # [B, N, 2]
        delta, dist, other = self._pairs(pos)
        k = self.contact_margin
        x = -(dist - 2 * self.agent_size) / k
        penetration = (tf.maximum(x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x)))) * k  # np.logaddexp(0, x) * k
        contact = self.contact_force * delta / dist[..., None] * penetration[..., None]
        force = force + tf.reduce_sum(tf.where(other[..., None], contact, tf.zeros_like(contact)), axis=2)
        if self.physics == "mpe2":  # mpe2 1.1.1: position from the old velocity, then the velocity
            pos = pos + vel * self.dt
            vel = vel * (1 - self.damping) + force * self.dt
        else:  # the original MPE (and the reference MAPPO's copy): velocity first, position from it
            vel = vel * (1 - self.damping) + force * self.dt
            pos = pos + vel * self.dt
        new_state = self.pack_state(pos, vel, landmarks)
        return new_state, self._rewards(pos, landmarks), tf.zeros([self.num_envs], tf.bool)

    def _rewards(self, pos: tf.Tensor, landmarks: tf.Tensor) -> tf.Tensor:
        """Per-agent rewards ``[B, N]`` (float32) at agent positions ``pos`` ``[B, N, 2]``."""
        to_landmark = tf.sqrt(tf.reduce_sum(tf.square(pos[:, :, None, :] - landmarks[:, None, :, :]), axis=-1))
        global_reward = -tf.reduce_sum(tf.reduce_min(to_landmark, axis=1), axis=1)  # [B]
        _, dist, other = self._pairs(pos)
        collisions = tf.reduce_sum(tf.cast(tf.logical_and(other, dist < 2 * self.agent_size), dist.dtype), axis=2)
        if self.reward_kind == "mpe2":
            reward = global_reward[:, None] * (1 - self.local_ratio) + (-collisions) * self.local_ratio
        else:
            own = global_reward[:, None] - collisions - 1.0  # the reference counts each agent's collision with itself
            reward = tf.tile(tf.reduce_sum(own, axis=1, keepdims=True), [1, self.num_agents])
        return tf.cast(reward, tf.float32)

    def _observe(self, state: tf.Tensor) -> tf.Tensor:
        """Observations ``[B*N, O]`` float32 (folded) of physical states ``[B, 6N]``."""
        n, m = self.num_agents, self.num_landmarks
        b = self.num_envs
        pos, vel, landmarks = self.unpack_state(state)
        to_landmarks = tf.reshape(landmarks[:, None, :, :] - pos[:, :, None, :], [b, n, 2 * m])
        rel = tf.reshape(pos[:, None, :, :] - pos[:, :, None, :], [b, n * n, 2])  # row i*N+j: p_j - p_i
        others = tf.reshape(tf.gather(rel, self._others, axis=1), [b, n, 2 * (n - 1)])
        comm = tf.zeros([b, n, self.dim_c * (n - 1)], state.dtype)
        obs = tf.concat([vel, pos, to_landmarks, others, comm], axis=2)
        return tf.reshape(tf.cast(obs, tf.float32), [b * n, self.obs_size])

    # ----------------------------------------------------------------- public API

    def _rows(self, x: tf.Tensor) -> tf.Tensor:
        """Per-env values ``[B, ...]`` repeated on each of the env's N rows: ``[B*N, ...]``."""
        return tf.repeat(x, self.num_agents, axis=0)

    def step(self, action: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Step every env with actions int ``[B*N]``; returns ``obs, reward, terminated, truncated`` (folded).

        Env copies that ended an episode at the previous step reset instead (their actions
        are ignored, reward 0, flags false), as :meth:`TFEnv.step`.
        """
        n = self.num_envs
        action = self._prepare_action(action)
        resetting = self.needs_reset.read_value()
        new_state, reward, terminated = self._dynamics(self.state.read_value(), action)
        elapsed = self.elapsed + 1
        truncated = elapsed >= self.max_episode_steps

        new_state = tf.where(resetting[:, None], self._fresh_states(resetting), new_state)
        elapsed = tf.where(resetting, tf.zeros_like(elapsed), elapsed)
        reward = tf.where(resetting[:, None], tf.zeros_like(reward), reward)
        terminated = tf.logical_and(terminated, tf.logical_not(resetting))
        truncated = tf.logical_and(truncated, tf.logical_not(resetting))
        done = tf.logical_or(terminated, truncated)
        valid = tf.logical_not(resetting)

        self.state.assign(new_state)
        self.elapsed.assign(elapsed)
        self.needs_reset.assign(done)
        self.valid.assign(valid)
        self._record(tf.reduce_mean(reward, axis=1), valid, done)  # episode return: mean over agents
        obs = self._observe(new_state)
        return obs, tf.reshape(reward, [n * self.num_agents]), self._rows(terminated), self._rows(truncated)

    def global_state(self, obs: tf.Tensor | None = None) -> tf.Tensor:
        """mpe2's ``state()`` on every row: ``[B*N, N*O]`` float32, from ``obs`` (folded) or the current state."""
        if obs is None:
            obs = self._observe(self.state)
        return self._rows(tf.reshape(obs, [self.num_envs, self.state_width]))

    def valid_rows(self) -> tf.Tensor:
        """:attr:`valid` (``False`` on a reset step) on every row: ``[B*N]`` bool."""
        return self._rows(self.valid)

    def drain_team_episodes(self) -> list[tuple[float, int]]:
        """(Eager only.) As :meth:`drain_episodes`, with the team return (sum over agents)."""
        return [(r * self.num_agents, length) for r, length in self.drain_episodes()]

    # ----------------------------------------------------------------- spaces

    @property
    def single_observation_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Box(-np.float32(np.inf), np.float32(np.inf), (self.obs_size,), np.float32)

    @property
    def single_state_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Box(-np.float32(np.inf), np.float32(np.inf), (self.state_width,), np.float32)

    @property
    def single_action_space(self) -> Any:
        from gymnasium import spaces

        return spaces.Discrete(self.num_actions)

    def __repr__(self) -> str:
        kind, dtype = self.reward_kind, self.dtype.name
        return f"TFSpread(num_envs={self.num_envs}, N={self.num_agents}, reward={kind}, dtype={dtype})"
