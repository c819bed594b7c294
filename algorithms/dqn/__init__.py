"""DQN: a Q-network learned from replayed transitions, many gradient steps per compiled
call, with a target network synchronised by ``sync_target`` (``learner.py``)."""

from __future__ import annotations

from typing import Any

from rlgen.algorithms.base import Algorithm, Ref
from rlgen.algorithms.dqn.config import METRICS, DQNConfig
from rlgen.dsl.methods import method as _m


def lower(k: Any, name: str) -> dict[str, Any]:
    """Constructor arguments: the Q-network's component and the config."""
    return {
        "q": k.ctx.spec.components[name].get("q"),
        "config": ALGORITHM.settings_of(k.plain[name]),
        "reduce": k.reduce,
    }


ALGORITHM = Algorithm(
    kind="dqn",
    title="A DQN learner (defaults as Stable-Baselines3)",
    config=DQNConfig,
    refs=(Ref("q", frozenset({"qvalue"}), "The name of the qvalue component it trains.", "q"),),
    methods={"update": _m("update", "batch:batch", "metrics:metrics?"), "sync_target": _m("sync_target")},
    metrics=METRICS,
    lower=lower,
    acts="q",
    acts_through_policy=True,
    discrete_actions=True,
    names=("DQNConfig", "DQNLearner"),
    example={"kind": "dqn", "q": "q", "lr": 0.0023},
)
