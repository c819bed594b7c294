"""DQN's settings: defaults are Stable-Baselines3's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import BOOLEAN, FRACTION, OPTIMIZER, POSITIVE, RATE, setting
from rlgen.algorithms.ppo.config import Rate

STEP_METRICS = ("loss", "q", "target_q", "grad_norm")
#: The entries of an update's metrics vector, in order.
METRICS = (*STEP_METRICS, "lr")


@dataclass
class DQNConfig:
    """DQN hyper-parameters; each field's ``doc`` says what it means.

    ``jit_compile=None`` compiles the update with XLA unless a gradient reducer is
    given (Horovod's ops have no XLA kernels) or the networks convolve (XLA's CPU
    convolutions are slow to compile and to run); it is not a spec setting.
    """

    lr: Rate = setting(1.0e-4, "The learning rate: a number or a linear schedule.", RATE, (0.0023,))
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    tau: float = setting(
        1.0,
        "The target-network update rate of sync_target(); 1 copies the weights.",
        {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        (0.005,),
    )
    double: bool = setting(False, "Use double-DQN targets.", BOOLEAN, (True,))
    max_grad_norm: float | None = setting(10.0, "Gradients are clipped to this global norm.", POSITIVE)
    optimizer: Mapping[str, Any] = setting({"kind": "adam", "eps": 1.0e-8}, "The optimizer.", OPTIMIZER)
    jit_compile: bool | None = setting(
        None, "Compile the update with XLA (None: unless gradients are reduced).", BOOLEAN, spec=False
    )
