"""TD3: twin delayed DDPG (Fujimoto et al. 2018): a deterministic actor, twin critics,
target policy smoothing and delayed actor updates, learned from replayed transitions,
many gradient steps per compiled call (``learner.py``)."""

from __future__ import annotations

from rlgen.algorithms.base import Algorithm, Ref
from rlgen.algorithms.sac import CRITIC, UPDATE, lower_actor_critic
from rlgen.algorithms.td3.config import METRICS, TD3Config

ALGORITHM = Algorithm(
    kind="td3",
    title="A TD3 learner (defaults as Stable-Baselines3)",
    config=TD3Config,
    refs=(
        Ref(
            "actor",
            frozenset({"policy"}),
            "The name of the policy component it trains (distribution: deterministic).",
            "actor",
        ),
    ),
    networks=(CRITIC,),
    methods={"update": UPDATE},
    metrics=METRICS,
    lower=lambda k, name: lower_actor_critic(k, name, ALGORITHM),
    acts="actor",
    actor_distribution="deterministic",
    seeded=True,
    names=("TD3Config", "TD3Learner", "QCritic"),
    example={"kind": "td3", "actor": "actor", "critic": "q"},
)
