"""A2C: synchronous advantage actor-critic, one gradient step per rollout (``learner.py``
runs it as PPO's compiled update with one epoch and no clipping)."""

from __future__ import annotations

from typing import Any

from rlgen.algorithms.a2c.config import A2CConfig
from rlgen.algorithms.base import Algorithm
from rlgen.algorithms.ppo import POLICY, UPDATE, VALUE, rollout_length
from rlgen.algorithms.ppo.config import METRICS as PPO_METRICS

#: PPO's metrics vector, with the slots that mean nothing without clipping and with one epoch
#: unnamed (a metrics row leaves them out): the approximate KL, the clip fraction, the clip range.
METRICS = tuple("" if m in ("approx_kl", "clip_fraction", "clip") else m for m in PPO_METRICS)


def lower(k: Any, name: str) -> dict[str, Any]:
    """Constructor arguments: the networks' components, the rollout's length, the config."""
    comp = k.ctx.spec.components[name]
    return {
        "policy": comp.get("policy"),
        "value": comp.get("value"),
        "steps": rollout_length(k),
        "config": ALGORITHM.settings_of(k.plain[name]),
        "reduce": k.reduce,
    }


ALGORITHM = Algorithm(
    kind="a2c",
    title="An A2C learner (defaults as Stable-Baselines3)",
    config=A2CConfig,
    refs=(POLICY, VALUE),
    methods={"update": UPDATE},
    metrics=METRICS,
    lower=lower,
    acts="policy",
    buffer="rollout",
    needs_inserted=("value",),
    in_graph=True,
    seeded=True,
    names=("A2CConfig", "A2CLearner"),
    example={"kind": "a2c", "policy": "actor", "value": "critic", "ent_coef": 0.0},
)
