"""simple_spread with the reference MAPPO's (marlbenchmark/on-policy) rewards and landmarks.

Built on mpe2's ``simple_spread`` scenario, changing only what the reference does differently:

- every agent gets the team's summed reward (on-policy's ``shared_reward``: ``np.sum(reward_n)``
  handed to each agent), where agent ``i``'s own reward is the global landmark term
  (``-sum over landmarks of the distance to the nearest agent``) minus 1 per agent it collides
  with, itself included: the reference's ``is_collision(a, agent)`` loop has no ``a != agent``
  test, so each agent pays -1 every step for "colliding" with itself;
- landmarks start at ``0.8 * U(-1, 1)`` instead of ``U(-1, 1)`` (the same random draws, scaled).

``parallel_env(**kwargs)`` (so ``pettingzoo: rlgen.runtime.mpe.reference`` works) and the
faster ``reference_spread`` (the factory ``rlgen.runtime.mpe.reference:reference_spread``) take
mpe2's ``simple_spread_v3`` arguments but ``local_ratio`` (the reference has no local part).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpe2._mpe_utils.simple_env import make_env
from mpe2.simple_spread.simple_spread import ExtendedWorld, Scenario, raw_env
from pettingzoo.utils.conversions import aec_to_parallel_wrapper, parallel_wrapper_fn

#: Landmarks start at this times mpe2's U(-1, 1) positions.
LANDMARK_SCALE = 0.8


class ReferenceScenario(Scenario):
    """mpe2's scenario with the reference's landmark range and team reward (as ``global_reward``,
    which the env hands every agent whole with ``local_ratio = 0``)."""

    def reset_world(self, world: ExtendedWorld, np_random: np.random.Generator) -> None:
        super().reset_world(world, np_random)
        for landmark in world.landmarks:
            landmark.state.p_pos = LANDMARK_SCALE * landmark.state.p_pos

    def global_reward(self, world: ExtendedWorld) -> float:
        # Each agent's reference reward: mpe2's global landmark term, plus mpe2's reward (-1 per
        # other agent it collides with), plus -1 for itself; summed over the agents.
        n = len(world.agents)
        collisions = sum(self.reward(agent, world) for agent in world.agents)
        return n * super().global_reward(world) + collisions - n


class raw_reference_env(raw_env):
    def __init__(self, local_ratio: float = 0.0, **kwargs: Any) -> None:
        if local_ratio != 0.0:
            raise ValueError("the reference simple_spread has no local reward part: leave local_ratio out")
        super().__init__(local_ratio=0.0, **kwargs)
        scenario = ReferenceScenario.__new__(ReferenceScenario)
        scenario.__dict__.update(vars(self.scenario))  # mpe2's settings (curriculum, neighbours, ...)
        self.scenario = scenario
        self.metadata = {**self.metadata, "name": "simple_spread_reference"}


env = make_env(raw_reference_env)
parallel_env = parallel_wrapper_fn(env)


def reference_spread(**kwargs: Any) -> Any:
    """A PettingZoo ParallelEnv: simple_spread as the reference MAPPO defines it (module docstring),
    without PettingZoo's order-enforcing and action-bounds-asserting wrappers that
    :func:`parallel_env` has: their attribute forwarding costs about 30% of a step, and
    :class:`rlgen.runtime.agents.ParallelVectorEnv` checks actions itself."""
    return aec_to_parallel_wrapper(raw_reference_env(**kwargs))
