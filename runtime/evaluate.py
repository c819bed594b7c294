"""Evaluating a policy: run whole episodes on fresh envs and report their returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .envs import VectorEnv

ActFn = Callable[[np.ndarray], np.ndarray]


def evaluate(act: ActFn, env: Mapping[str, Any], episodes: int, seed: int) -> np.ndarray:
    """Returns of ``episodes`` complete episodes of ``act`` on envs made from ``env``.

    ``env`` holds ``id``/``factory``/``kwargs``/``max_episode_steps`` as in the spec.
    The envs are seeded apart from training's (rank ``1 << 16``), and only the first
    episode of each env counts, so every episode starts from a fresh seeded reset.
    """
    n = max(1, min(int(episodes), 16))
    vec = VectorEnv(
        env_id=env.get("id"),
        num_envs=n,
        seed=seed,
        rank=1 << 16,
        factory=env.get("factory"),
        kwargs=env.get("kwargs") or {},
        max_episode_steps=env.get("max_episode_steps"),
    )
    returns: list[float] = []
    try:
        while len(returns) < episodes:
            obs = vec.reset()
            running = np.zeros(n, np.float64)
            finished = np.zeros(n, bool)
            while not finished.all():
                obs, reward, terminated, truncated = vec.step(np.asarray(act(np.asarray(obs, np.float32))))
                running += np.where(finished, 0.0, reward)
                ended = np.logical_or(terminated, truncated) & ~finished
                returns.extend(float(r) for r in running[ended])
                finished |= ended
    finally:
        vec.close()
    return np.asarray(returns[:episodes], np.float64)
