"""An in-graph TF env driven from host code, with the interface of :class:`rlgen.runtime.envs.VectorEnv`.

This is how env fragments run ``backend: tensorflow`` envs under every policy: one
XLA-compiled call per vector step (through the public call path: the fast path of
``rlgen.runtime.tfutil`` needs a function already registered by a first call, and a
warm-up call would step the env). (Under ``single`` the whole loop can instead be
compiled into one graph, where the env needs no host calls at all.)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import tensorflow as tf

from ..envs import env_seed
from . import make_tf_env


class HostTFEnv:
    """``num_envs`` in-graph envs stepped by one compiled call, seeded by ``(seed, rank)``."""

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int = 0,
        rank: int = 0,
        max_episode_steps: int | None = None,
    ) -> None:
        self.num_envs = int(num_envs)
        self.env = make_tf_env(env_id, self.num_envs, seed=env_seed(seed, rank), max_episode_steps=max_episode_steps)
        space = self.env.single_action_space
        if isinstance(space, gym.spaces.Discrete):
            spec = tf.TensorSpec([self.num_envs], tf.int32, name="action")
        else:
            spec = tf.TensorSpec([self.num_envs, *space.shape], tf.float32, name="action")
        self._step = tf.function(self.env.step, input_signature=[spec], jit_compile=True)
        self._action_dtype = spec.dtype
        self.observation_space = self.env.single_observation_space
        self.action_space = space

    def reset(self) -> np.ndarray:
        return self.env.reset().numpy()

    def step(self, action: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        out = self._step(tf.constant(np.asarray(action), self._action_dtype))
        obs, reward, terminated, truncated = (t.numpy() for t in out)
        return obs, reward, terminated, truncated

    @property
    def valid(self) -> np.ndarray:
        return self.env.valid.numpy()

    def drain_episodes(self) -> list[tuple[float, int]]:
        return self.env.drain_episodes()

    def close(self) -> None:
        """Nothing to release: the env is a set of tf.Variables."""


class HostTFAgentEnv:
    """A multi-agent in-graph env (``pettingzoo: ..., backend: tensorflow``) stepped by one compiled
    call per vector step: ``num_envs`` env copies of N agents, folded into ``num_envs * N`` rows,
    seeded by ``(seed, rank)``. ``reset``/``step`` return the global state when ``state`` is set and
    ``first`` last when ``first`` is (as :class:`rlgen.runtime.mpe.agent_env.TFAgentEnv`)."""

    def __init__(
        self,
        pettingzoo: str,
        num_envs: int,
        seed: int = 0,
        rank: int = 0,
        kwargs: dict[str, Any] | None = None,
        state: str | None = None,
        first: bool = False,
    ) -> None:
        from ..mpe.agent_env import make_tf_agent_env

        self.num_envs = int(num_envs)
        self.env = make_tf_agent_env(
            pettingzoo, self.num_envs, seed=env_seed(seed, rank), kwargs=kwargs, state=state, first=first
        )
        self.num_agents = self.env.num_agents
        spec = tf.TensorSpec([self.env.num_rows], tf.int32, name="action")
        self._step = tf.function(self.env.step, input_signature=[spec], jit_compile=True)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space

    def reset(self) -> np.ndarray | tuple[np.ndarray, ...]:
        out = self.env.reset()
        return tuple(t.numpy() for t in out) if isinstance(out, tuple) else out.numpy()

    def step(self, action: Any) -> tuple[np.ndarray, ...]:
        return tuple(t.numpy() for t in self._step(tf.constant(np.asarray(action), tf.int32)))

    @property
    def valid(self) -> np.ndarray:
        """Which rows hold a step of a running episode (``False`` on a reset step), ``[num_envs * N]``."""
        return self.env.valid_rows().numpy()

    def drain_episodes(self) -> list[tuple[float, int]]:
        return self.env.drain_episodes()

    def drain_team_episodes(self) -> list[tuple[float, int]]:
        return self.env.drain_team_episodes()

    def close(self) -> None:
        """Nothing to release: the env is a set of tf.Variables."""
