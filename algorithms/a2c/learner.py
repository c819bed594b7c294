"""A2C as PPO's compiled update with one epoch over the whole rollout and no clipping:
at ratio 1 the clipped surrogate's gradient is exactly A2C's policy gradient."""

from __future__ import annotations

import dataclasses
from typing import Any

from rlgen.algorithms.a2c.config import A2CConfig
from rlgen.algorithms.ppo.config import PPOConfig
from rlgen.algorithms.ppo.learner import PPOLearner
from rlgen.runtime.policies import Policy, Value


def as_ppo(config: A2CConfig, samples: int) -> PPOConfig:
    """PPO's config that performs this A2C update on rollouts of ``samples`` samples."""
    return PPOConfig(**dataclasses.asdict(config), epochs=1, minibatch=samples, clip=1.0e9, clip_value=None)


class A2CLearner(PPOLearner):
    """:class:`PPOLearner` configured by :func:`as_ppo`."""

    def __init__(
        self, policy: Policy, value: Value, config: A2CConfig, num_steps: int, num_envs: int, **kw: Any
    ) -> None:
        super().__init__(policy, value, as_ppo(config, int(num_steps) * int(num_envs)), num_steps, num_envs, **kw)
