"""``actors-learner``: rank 0 learns; ranks 1..N-1 act with their envs and a policy copy
(Acme, IMPALA, MSRL MultiActorSingleLearner). Cut: the experience partition."""

from rlgen.codegen.policies.base import Collective, DistributionPolicy, Role

POLICY = DistributionPolicy(
    name="actors-learner",
    summary="rank 0 learner, ranks 1..N-1 actors",
    cut="experience",
    roles=(Role("learner", "0", "learning"), Role("actor", "rest", "acting")),
    collectives=(
        Collective("allgather", "send", "actor -> learner", "all"),
        Collective("broadcast", "weights", "learner -> actor", "all"),
    ),
    min_workers=2,
    env_role="actor",
    learner_role="learner",
)
