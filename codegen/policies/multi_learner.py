"""``multi-learner``: every rank acts and learns on its own envs; gradients are averaged
(DD-PPO, Sebulba). Cut: the gradients partition. The ranks meet in a Horovod allreduce
at every gradient step, so they also agree on stopping at every iteration (lockstep)."""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="multi-learner",
    summary="every rank acts and learns; gradients allreduced",
    cut="gradients",
    roles=(Role("worker", "all", "both"),),
    edges=(
        Edge("weights", "worker", "worker", "broadcast"),  # rank 0's initial weights
        Edge("reduce", "worker", "worker", "allreduce"),
    ),
    min_workers=2,
    env_role="worker",
    learner_role="worker",
    control="lockstep",
)
