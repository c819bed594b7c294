"""A2C's settings: defaults are Stable-Baselines3's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import BOOLEAN, FRACTION, NON_NEGATIVE, OPTIMIZER, POSITIVE, RATE, setting
from rlgen.algorithms.ppo.config import CLIP_RATIO, Rate


@dataclass
class A2CConfig:
    """A2C (synchronous advantage actor-critic) hyper-parameters; each field's ``doc``
    says what it means. ``jit_compile`` as :class:`rlgen.algorithms.ppo.config.PPOConfig`."""

    lr: Rate = setting(
        7.0e-4,
        "The learning rate: a number or a linear schedule.",
        RATE,
        ({"schedule": "linear", "start": 0.0007, "end": 0.0},),
    )
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    gae_lambda: float = setting(1.0, "The GAE lambda; 1.0 gives plain n-step returns.", FRACTION, (0.9,))
    ent_coef: float = setting(0.0, "The weight of the entropy bonus in the loss.", NON_NEGATIVE, (0.01,))
    vf_coef: float = setting(0.5, "The weight of the value loss in the loss.", NON_NEGATIVE, (0.4,))
    max_grad_norm: float | None = setting(0.5, "Gradients are clipped to this global norm.", POSITIVE)
    normalize_advantage: bool = setting(False, "Normalise advantages per update.", BOOLEAN)
    correction: str = setting(
        "ratio",
        "How updates correct for experience collected with older weights (asynchronous actors): `ratio` "
        "(A2C's gradient weighted by the ratio against the stored behaviour log-probabilities; exactly A2C "
        "when there is no lag) or `vtrace` (IMPALA, Espeholt et al. 2018: value targets and advantages by "
        "V-trace with the ratio clipped at `rho_clip` and traces at `c_clip`, and the policy gradient taken "
        "at the current policy, weighted by the advantage alone).",
        {"enum": ["ratio", "vtrace"]},
        ("vtrace",),
    )
    rho_clip: float = setting(
        1.0, "V-trace: clip of the importance ratio in the temporal differences (rho bar).", CLIP_RATIO
    )
    c_clip: float = setting(1.0, "V-trace: clip of the importance ratio in the traces (c bar).", CLIP_RATIO)
    optimizer: Mapping[str, Any] = setting(
        {"kind": "rmsprop", "alpha": 0.99, "eps": 1.0e-5}, "The optimizer.", OPTIMIZER
    )
    jit_compile: bool | None = setting(
        None, "Compile the update with XLA (None: unless gradients are reduced).", BOOLEAN, spec=False
    )
