"""In-graph TensorFlow versions of gymnasium's classic-control environments.

Each env is a :class:`~rlgen.runtime.tfenvs.base.TFEnv` (a ``tf.Module``) that steps
``num_envs`` copies at once with TensorFlow ops, so it can run inside a ``tf.function``
or ``tf.while_loop`` (``jit_compile=True`` works) and a whole rollout can be one graph.
Dynamics, rewards, time limits and reset distributions follow gymnasium's own
implementations; the step and auto-reset convention is that of
:mod:`rlgen.runtime.envs` (gymnasium's ``NEXT_STEP``)::

    env = make_tf_env("CartPole-v1", num_envs=1024, seed=0)
    obs = env.reset()
    obs, reward, terminated, truncated = env.step(actions)
"""

from __future__ import annotations

from typing import Any

from .acrobot import Acrobot
from .base import TFEnv
from .cartpole import CartPole
from .mountain_car import MountainCar
from .pendulum import Pendulum

TF_ENVS: dict[str, type[TFEnv]] = {cls.env_id: cls for cls in (CartPole, Acrobot, MountainCar, Pendulum)}


def make_tf_env(
    env_id: str,
    num_envs: int,
    seed: int = 0,
    max_episode_steps: int | None = None,
    **kwargs: Any,
) -> TFEnv:
    """Build the TF env registered as ``env_id`` (a gymnasium id, see :data:`TF_ENVS`).

    ``max_episode_steps`` defaults to gymnasium's registration; ``kwargs`` go to
    :class:`TFEnv` (``dtype``, ``episode_capacity``, ``name``).
    """
    try:
        cls = TF_ENVS[env_id]
    except KeyError:
        raise ValueError(f"no TF implementation of {env_id!r}; available: {', '.join(sorted(TF_ENVS))}") from None
    return cls(num_envs, seed=seed, max_episode_steps=max_episode_steps, **kwargs)


__all__ = ["TF_ENVS", "Acrobot", "CartPole", "MountainCar", "Pendulum", "TFEnv", "make_tf_env"]
