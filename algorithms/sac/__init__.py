"""SAC: soft actor-critic (Haarnoja et al. 2018) with twin critics, Polyak-averaged
targets and an automatically tuned entropy coefficient, learned from replayed
transitions, many gradient steps per compiled call (``learner.py``)."""

from __future__ import annotations

import math
from typing import Any

from rlgen.algorithms.base import Algorithm, Ref
from rlgen.algorithms.sac.config import METRICS, SACConfig
from rlgen.dsl.methods import method

UPDATE = method("update", "batch:batch", "metrics:metrics?")
CRITIC = Ref(
    "critic",
    frozenset(),
    "The name of the network each Q-function of the critic is a copy of (over the observation and the action).",
    "q",
)


def lower_actor_critic(k: Any, name: str, algo: Algorithm) -> dict[str, Any]:
    """Constructor arguments shared by SAC and TD3: the actor's component, the critic's
    networks (a copy of the named network per Q-function, each seeded apart), the config."""
    comp = k.ctx.spec.components[name]
    settings = algo.settings_of(k.plain[name])
    net = comp.get("critic")
    first = 1 + sorted(k.ctx.spec.networks).index(net)
    spaces = k.ctx.spaces
    return {
        "actor": comp.get("actor"),
        "critic": {
            "network": net,
            "config": k.plain_networks[net],
            "input_size": math.prod(spaces.observation.shape) + math.prod(spaces.action.shape),
            "seeds": [first + 100 * i for i in range(int(settings["n_critics"]))],
        },
        "config": settings,
        "reduce": k.reduce,
    }


ALGORITHM = Algorithm(
    kind="sac",
    title="A SAC learner (defaults as Stable-Baselines3)",
    config=SACConfig,
    refs=(
        Ref(
            "actor",
            frozenset({"policy"}),
            "The name of the policy component it trains (distribution: squashed_gaussian).",
            "actor",
        ),
    ),
    networks=(CRITIC,),
    methods={"update": UPDATE},
    metrics=METRICS,
    lower=lambda k, name: lower_actor_critic(k, name, ALGORITHM),
    acts="actor",
    actor_distribution="squashed_gaussian",
    names=("SACConfig", "SACLearner", "QCritic"),
    example={"kind": "sac", "actor": "actor", "critic": "q", "lr": 0.001},
)
