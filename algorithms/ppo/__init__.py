"""PPO: clipped-surrogate policy optimisation of a policy and a value function from a
rollout buffer, all epochs and minibatches in one compiled call (``learner.py``)."""

from __future__ import annotations

from typing import Any

from rlgen.algorithms.base import Algorithm, Ref
from rlgen.algorithms.ppo.config import METRICS, PPOConfig
from rlgen.dsl.methods import method as _m

UPDATE = _m("update", "buffer:buffer obs:obs", "metrics:metrics?")
POLICY = Ref("policy", frozenset({"policy"}), "The name of the policy component it trains.", "actor")
VALUE = Ref("value", frozenset({"value"}), "The name of the value component it trains.", "critic")


def rollout_length(k: Any) -> int:
    """Steps per env of the rollout buffer the update reads."""
    buffer = next(e.name for e in k.fdg.graph.edges if e.type == "buffer")
    return k.buffer_len[buffer]


def lower(k: Any, name: str) -> dict[str, Any]:
    """Constructor arguments: the networks' components, the rollout's length, the config
    with the minibatch per learner (the spec's is over all learners)."""
    comp = k.ctx.spec.components[name]
    config = ALGORITHM.settings_of(k.plain[name])
    config["minibatch"] = int(config["minibatch"]) // k.learners
    return {
        "policy": comp.get("policy"),
        "value": comp.get("value"),
        "steps": rollout_length(k),
        "config": config,
        "reduce": k.reduce,
    }


ALGORITHM = Algorithm(
    kind="ppo",
    title="A PPO learner (defaults as Stable-Baselines3)",
    config=PPOConfig,
    refs=(POLICY, VALUE),
    methods={"update": UPDATE},
    metrics=METRICS,
    lower=lower,
    acts="policy",
    buffer="rollout",
    needs_inserted=("logp", "value"),
    in_graph=True,
    seeded=True,
    names=("PPOConfig", "PPOLearner"),
    example={
        "kind": "ppo",
        "policy": "actor",
        "value": "critic",
        "lr": {"schedule": "linear", "start": 0.001, "end": 0.0},
        "gamma": 0.98,
        "gae_lambda": 0.8,
        "epochs": 20,
        "minibatch": 256,
    },
)
