"""``multi-learner``: every rank acts and learns on its own envs; gradients are averaged
(DD-PPO, Sebulba). Cut: the gradients partition."""

from rlgen.codegen.policies.base import Collective, DistributionPolicy, Role

POLICY = DistributionPolicy(
    name="multi-learner",
    summary="every rank acts and learns; gradients allreduced",
    cut="gradients",
    roles=(Role("worker", "all", "both"),),
    collectives=(
        Collective("broadcast", "weights", "rank 0 -> all (initial weights)", "all"),
        Collective("allreduce", "reduce", "all <-> all", "all"),
    ),
    min_workers=2,
    env_role="worker",
    learner_role="worker",
)
