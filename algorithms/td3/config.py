"""TD3's settings: defaults are Stable-Baselines3's ``TD3``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import FRACTION, NON_NEGATIVE, OPTIMIZER, RATE, setting
from rlgen.algorithms.ppo.config import Rate
from rlgen.algorithms.sac.config import TAU

#: The entries of an update's metrics vector, in order.
METRICS = ("critic_loss", "actor_loss", "q", "lr")


@dataclass
class TD3Config:
    """Twin delayed DDPG hyper-parameters; each field's ``doc`` says what it means.

    Exploration noise is the acting policy's (``distribution: deterministic`` with
    ``noise_std``), not the learner's. ``jit_compile`` as in SAC's config.
    """

    lr: Rate = setting(
        1.0e-3, "The learning rate of the actor and the critics: a number or a linear schedule.", RATE, (3.0e-4,)
    )
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    tau: float = setting(0.005, "The Polyak rate of the target networks: target += tau * (online - target).", TAU)
    policy_delay: int = setting(
        2,
        "Update the actor and the targets once per this many critic updates.",
        {"type": "integer", "minimum": 1, "maximum": 1000},
    )
    target_policy_noise: float = setting(
        0.2, "The standard deviation of the noise smoothing the target policy's action.", NON_NEGATIVE
    )
    target_noise_clip: float = setting(0.5, "The target policy noise is clipped to plus or minus this.", NON_NEGATIVE)
    n_critics: int = setting(
        2,
        "Q-networks in the critic (2: twin critics, the minimum is used).",
        {"type": "integer", "minimum": 1, "maximum": 10},
    )
    optimizer: Mapping[str, Any] = setting(
        {"kind": "adam", "eps": 1.0e-8}, "The optimizer of the actor and of the critics.", OPTIMIZER
    )
    jit_compile: bool | None = setting(
        None, "Compile the update with XLA (None: unless gradients are reduced).", {"type": "boolean"}, spec=False
    )

    def __post_init__(self) -> None:
        if not 0.0 < float(self.tau) <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if int(self.policy_delay) < 1:
            raise ValueError(f"policy_delay must be >= 1, got {self.policy_delay}")
