"""MAPPO and IPPO: PPO for agents folded into the batch (see ``docs`` and the multi-agent
design), with the reference MAPPO's critic (marlbenchmark/on-policy): value
normalisation, a clipped Huber value loss, a separate critic optimizer, and truncation
optionally treated as termination. ``mappo``'s value function reads the global ``state``
(a centralised critic); ``ippo``'s reads each agent's own observation. One learner
(``learner.py``) serves both kinds."""

from __future__ import annotations

from typing import Any

from rlgen.algorithms.base import Algorithm
from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig
from rlgen.algorithms.ppo import POLICY, VALUE, rollout_length
from rlgen.dsl.methods import method as _m

#: ``update(buffer, obs, state)``: ``state`` (the global state the centralised critic reads
#: at the rollout's end) goes with a buffer that stores states; a recurrent critic's state after
#: the rollout's last step (``hidden``) comes last.
UPDATE = _m("update", "buffer:buffer obs:obs state:state? hidden:hidden?", "metrics:metrics?")
IPPO_UPDATE = _m("update", "buffer:buffer obs:obs hidden:hidden?", "metrics:metrics?")


def _reads_state(k: Any, name: str) -> bool:
    """Does a call of this learner pass a state (``update(buffer, obs, state)``)?"""
    states = {e.name for e in k.fdg.graph.edges if e.type == "state"}
    return any(
        n.component == name and n.method == "update" and any(a in states for a in n.inputs) for n in k.fdg.graph.nodes
    )


def lower(k: Any, name: str) -> dict[str, Any]:
    """Constructor arguments: the networks' components, the rollout's length, the config
    with the minibatch per learner (the spec's is over all learners; null stays null: the
    whole rollout), and whether the value function reads a state."""
    comp = k.ctx.spec.components[name]
    config = MAPPO.settings_of(k.plain[name])
    if config.get("minibatch") is not None:
        config["minibatch"] = int(config["minibatch"]) // k.learners
    return {
        "policy": comp.get("policy"),
        "value": comp.get("value"),
        "steps": rollout_length(k),
        "config": config,
        "reduce": k.reduce,
        "state": comp.kind == "mappo" and _reads_state(k, name),
    }


_EXAMPLE = {"policy": "actor", "value": "critic", "lr": 0.0005, "epochs": 15}


def _algorithm(kind: str, title: str, update: Any) -> Algorithm:
    """The two kinds differ only in their name, title and update signature."""
    return Algorithm(
        kind=kind,
        title=title,
        config=MAPPOConfig,
        refs=(POLICY, VALUE),
        methods={"update": update},
        metrics=METRICS,
        lower=lower,
        acts="policy",
        buffer="rollout",
        needs_inserted=("logp", "value"),
        in_graph=True,
        seeded=True,
        names=("MAPPOConfig", "MAPPOLearner"),
        example={"kind": kind, **_EXAMPLE},
    )


MAPPO = _algorithm(
    "mappo",
    "A MAPPO learner (multi-agent PPO with a centralised critic reading the global state; "
    "defaults as the reference MAPPO, marlbenchmark/on-policy)",
    UPDATE,
)
IPPO = _algorithm(
    "ippo",
    "An IPPO learner (independent PPO: each agent's value reads its own observation; "
    "defaults as the reference MAPPO, marlbenchmark/on-policy)",
    IPPO_UPDATE,
)

#: This home's first kind; ``rlgen.algorithms.ippo`` names the second (``IPPO``) for the
#: registry, the templates and generated imports, all of which find a kind's home by its name.
ALGORITHM = MAPPO
