"""MAPPO's and IPPO's settings: PPO's, with the reference MAPPO's defaults
(marlbenchmark/on-policy, Yu et al. 2022) and its value-function options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import BOOLEAN, FRACTION, NON_NEGATIVE, OPTIMIZER, POSITIVE, RATE, setting
from rlgen.algorithms.ppo.config import METRICS, PPOConfig, Rate

__all__ = ["METRICS", "MAPPOConfig"]  # METRICS: an update's metrics vector is PPO's

RATE_OR_NULL = {"anyOf": [RATE, {"type": "null"}]}


@dataclass
class MAPPOConfig(PPOConfig):
    """PPO's settings (:class:`rlgen.algorithms.ppo.config.PPOConfig`) with the reference
    MAPPO's defaults, and its critic's options: a separate critic learning rate and
    optimizer, value normalisation, a Huber value loss, value clipping as a maximum of
    clipped and unclipped losses, and truncation as termination.

    ``minibatch=None`` is the whole rollout (one minibatch per epoch, the reference's
    ``num_mini_batch: 1``); the runtime's ``minibatch`` is per learner, as PPO's.
    """

    lr: Rate = setting(
        7.0e-4,
        "The learning rate of the policy (and of the value function unless `critic_lr` is set): "
        "a number or a linear schedule.",
        RATE,
        ({"schedule": "linear", "start": 0.0007, "end": 0.0},),
    )
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    gae_lambda: float = setting(0.95, "The GAE lambda, trading bias for variance of the advantages.", FRACTION, (0.9,))
    clip: Rate = setting(
        0.2,
        "The clip range of the policy ratio: a number or a linear schedule.",
        RATE,
        ({"schedule": "linear", "start": 0.2, "end": 0.0},),
    )
    clip_value: float | None = setting(
        0.2,
        "The clip range of the value change; the value loss is the larger of the clipped and the "
        "unclipped one (as the reference MAPPO). Null leaves the value loss unclipped.",
        {"type": ["number", "null"], "exclusiveMinimum": 0},
        (None,),
    )
    epochs: int = setting(
        10, "Passes over the rollout per update.", {"type": "integer", "minimum": 1, "maximum": 10000}, (15,)
    )
    minibatch: int | None = setting(
        None,
        "Samples per gradient step, over all workers; null: the whole rollout (one minibatch per epoch).",
        {"type": ["integer", "null"], "minimum": 1, "maximum": 100000000},
        (400,),
    )
    ent_coef: float = setting(0.01, "The weight of the entropy bonus in the policy loss.", NON_NEGATIVE, (0.0,))
    vf_coef: float = setting(1.0, "The weight of the value loss.", NON_NEGATIVE, (0.5,))
    max_grad_norm: float | None = setting(
        10.0,
        "The policy's and the value function's gradients are each clipped to this global norm.",
        POSITIVE,
        (0.5,),
    )
    normalize_advantage: bool = setting(True, "Normalise advantages per minibatch.", BOOLEAN)
    optimizer: Mapping[str, Any] = setting(
        {"kind": "adam", "eps": 1.0e-5}, "The optimizer (the policy's and the value function's each).", OPTIMIZER
    )
    critic_lr: Rate | None = setting(
        None,
        "The value function's learning rate: a number or a linear schedule; null: `lr`. The policy "
        "and the value function have separate optimizers (when they share no network).",
        RATE_OR_NULL,
        (0.0007,),
    )
    value_norm: bool = setting(
        True,
        "Value normalisation (the reference's ValueNorm): the value function predicts returns "
        "normalised by running, debiased statistics (decay 0.99999) updated at every gradient step "
        "with its minibatch's returns, then normalising them into the step's targets (as the "
        "reference); its outputs are denormalised for the advantages.",
        BOOLEAN,
        (False,),
    )
    huber_delta: float | None = setting(
        10.0,
        "The Huber loss threshold of the value loss; null: the squared error (halved, as the reference).",
        {"type": ["number", "null"], "exclusiveMinimum": 0},
        (None,),
    )
    time_limit: str = setting(
        "bootstrap",
        "How a truncated episode ends: `bootstrap` (from the value of its final observation) or "
        "`terminal` (as a termination, the reference MAPPO's behaviour).",
        {"enum": ["bootstrap", "terminal"]},
        ("terminal",),
    )
    chunk: int = setting(
        10,
        "With recurrent networks: the length of the sequences the update unrolls (the reference's "
        "`data_chunk_length`), cut from the rollout's rows laid end to end, each from the state "
        "stored when acting; a minibatch holds whole chunks. Unused otherwise.",
        {"type": "integer", "minimum": 1, "maximum": 100000},
        (25,),
    )
