"""A2C as PPO's compiled update with one epoch over the whole rollout and no clipping:
at ratio 1 the clipped surrogate's gradient is exactly A2C's policy gradient.

With ``correction: vtrace`` (IMPALA, Espeholt et al. 2018) the gradient is taken at the
current policy: ``grad log pi(a|x)`` weighted by V-trace's advantage, which already holds
the clipped importance weight ``min(rho_clip, pi / mu)``. The ratio against the behaviour
policy is not applied a second time (PPO's learner with V-trace does apply it, as RLlib's
APPO); it still gives ``approx_kl``, the measure of the actors' lag."""

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
        gradient = "current" if config.correction == "vtrace" else "ratio"
        ppo = as_ppo(config, int(num_steps) * int(num_envs))
        super().__init__(policy, value, ppo, num_steps, num_envs, policy_gradient=gradient, **kw)
