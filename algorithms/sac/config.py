"""SAC's settings: defaults are Stable-Baselines3's ``SAC``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgen.algorithms.base import FRACTION, OPTIMIZER, RATE, setting
from rlgen.algorithms.ppo.config import Rate

STEP_METRICS = ("critic_loss", "actor_loss", "ent_coef", "ent_coef_loss", "q")
#: The entries of an update's metrics vector, in order.
METRICS = (*STEP_METRICS, "lr")

TAU = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
ENT_COEF = {
    "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": "^auto(_[0-9.eE+-]+)?$"}]
}
TARGET_ENTROPY = {"anyOf": [{"const": "auto"}, {"type": "number"}]}


@dataclass
class SACConfig:
    """Soft actor-critic hyper-parameters; each field's ``doc`` says what it means.

    The loop's settings (replay size, learning starts, batch size, train frequency,
    gradient steps) are not the learner's: they are the spec's ``replay`` component and
    ``loop`` blocks. ``jit_compile=None`` compiles the update with XLA unless a
    gradient reducer is given (Horovod's ops have no XLA kernels).
    """

    lr: Rate = setting(
        3.0e-4,
        "The learning rate of the actor, the critics and the entropy coefficient: a number or a linear schedule.",
        RATE,
        (1.0e-3,),
    )
    gamma: float = setting(0.99, "The discount factor.", FRACTION, (0.98,))
    tau: float = setting(
        0.005, "The Polyak rate of the target critics: target += tau * (online - target).", TAU, (0.01,)
    )
    ent_coef: str | float = setting(
        "auto",
        "The entropy coefficient alpha: auto learns it from 1.0, auto_0.1 from 0.1, a number keeps it fixed.",
        ENT_COEF,
        ("auto_0.1", 0.2),
    )
    target_entropy: str | float = setting(
        "auto", "The entropy the learned alpha aims at; auto is minus the action dimension.", TARGET_ENTROPY, (-3.0,)
    )
    target_update_interval: int = setting(
        1, "Update the target critics every this many gradient steps.", {"type": "integer", "minimum": 1}, (2,)
    )
    n_critics: int = setting(
        2,
        "Q-networks in the critic (2: twin critics, the minimum is used).",
        {"type": "integer", "minimum": 1, "maximum": 10},
    )
    optimizer: Mapping[str, Any] = setting(
        {"kind": "adam", "eps": 1.0e-8}, "The optimizer of each of the three parts.", OPTIMIZER
    )
    jit_compile: bool | None = setting(
        None, "Compile the update with XLA (None: unless gradients are reduced).", {"type": "boolean"}, spec=False
    )

    def __post_init__(self) -> None:
        if not 0.0 < float(self.tau) <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if int(self.target_update_interval) < 1:
            raise ValueError(f"target_update_interval must be >= 1, got {self.target_update_interval}")
        self.initial_ent_coef()  # validates ent_coef

    @property
    def auto_ent_coef(self) -> bool:
        """Whether alpha is learned (``ent_coef`` ``"auto"`` or ``"auto_<init>"``)."""
        return isinstance(self.ent_coef, str)

    def initial_ent_coef(self) -> float:
        """Alpha's starting value: ``1.0`` for ``"auto"``, ``x`` for ``"auto_x"``, or the fixed number."""
        value = self.ent_coef
        if isinstance(value, str):
            if value == "auto":
                return 1.0
            if not value.startswith("auto_"):
                raise ValueError(f"ent_coef must be 'auto', 'auto_<init>' or a number, got {value!r}")
            init = float(value[len("auto_") :])
        else:
            init = float(value)
        if init <= 0.0:
            raise ValueError(f"the entropy coefficient must be > 0, got {value!r}")
        return init

    def entropy_target(self, action_dim: int) -> float:
        """``target_entropy``, with ``"auto"`` resolved to ``-action_dim``."""
        return -float(action_dim) if self.target_entropy == "auto" else float(self.target_entropy)
