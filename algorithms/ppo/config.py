"""PPO's settings: defaults are Stable-Baselines3's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import BOOLEAN, FRACTION, NON_NEGATIVE, OPTIMIZER, POSITIVE, RATE, setting

Rate = float | Mapping[str, Any]  # a number, or {schedule: linear, start, end} over training progress

CORRECTION_DOC = (
    "How updates correct for experience collected with older weights (overlapped and asynchronous actors): "
    "`ratio` (the PPO importance ratio against the stored behaviour log-probabilities; exactly PPO when there "
    "is no lag) or `vtrace` (value targets and advantages by V-trace, Espeholt et al. 2018, with the ratio "
    "clipped at `rho_clip` and traces at `c_clip`; the PPO ratio still applies, as in RLlib's APPO)."
)
STEP_METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")
#: The entries of an update's metrics vector, in order.
METRICS = (*STEP_METRICS, "loss", "explained_variance", "lr", "clip")

CLIP_RATIO = {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000.0}


@dataclass
class PPOConfig:
    """PPO (clipped surrogate) hyper-parameters; each field's ``doc`` says what it means.

    In the runtime ``minibatch`` is per learner (codegen divides the spec's, which is
    over all workers, by the learners).
    ``jit_compile=None`` compiles the update with XLA unless a gradient reducer is
    given (Horovod's ops have no XLA kernels) or the networks convolve (XLA's CPU
    convolutions are slow to compile and to run); it is not a spec setting.
    """

    lr: Rate = setting(
        3.0e-4,
        "The learning rate: a number or a linear schedule.",
        RATE,
        ({"schedule": "linear", "start": 0.001, "end": 0.0},),
    )
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    gae_lambda: float = setting(0.95, "The GAE lambda, trading bias for variance of the advantages.", FRACTION, (0.8,))
    clip: Rate = setting(
        0.2,
        "The clip range of the policy ratio: a number or a linear schedule.",
        RATE,
        ({"schedule": "linear", "start": 0.2, "end": 0.0},),
    )
    clip_value: float | None = setting(
        None,
        "The clip range of the value-function change; null leaves the value loss unclipped.",
        {"type": ["number", "null"], "exclusiveMinimum": 0},
        (0.2,),
    )
    epochs: int = setting(
        10, "Passes over the rollout per update.", {"type": "integer", "minimum": 1, "maximum": 10000}, (20,)
    )
    minibatch: int = setting(
        64,
        "Samples per gradient step, over all workers.",
        {"type": "integer", "minimum": 1, "maximum": 100000000},
        (256,),
    )
    ent_coef: float = setting(0.0, "The weight of the entropy bonus in the loss.", NON_NEGATIVE, (0.01,))
    vf_coef: float = setting(0.5, "The weight of the value loss in the loss.", NON_NEGATIVE)
    max_grad_norm: float | None = setting(0.5, "Gradients are clipped to this global norm.", POSITIVE)
    normalize_advantage: bool = setting(True, "Normalise advantages per minibatch.", BOOLEAN)
    correction: str = setting("ratio", CORRECTION_DOC, {"enum": ["ratio", "vtrace"]}, ("vtrace",))
    rho_clip: float = setting(
        1.0, "V-trace: clip of the importance ratio in the temporal differences (rho bar).", CLIP_RATIO
    )
    c_clip: float = setting(1.0, "V-trace: clip of the importance ratio in the traces (c bar).", CLIP_RATIO)
    optimizer: Mapping[str, Any] = setting({"kind": "adam", "eps": 1.0e-5}, "The optimizer.", OPTIMIZER)
    jit_compile: bool | None = setting(
        None, "Compile the update with XLA (None: unless gradients are reduced).", BOOLEAN, spec=False
    )
