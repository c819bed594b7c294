"""``central-inference``: rank 0 runs inference and learning; ranks 1..N-1 only step envs
(SEED RL, MSRL SingleActorLearnerMultiEnv). Cut: the env partition."""

from rlgen.codegen.policies.base import Collective, DistributionPolicy, Role

POLICY = DistributionPolicy(
    name="central-inference",
    summary="rank 0 inference + learning, ranks 1..N-1 env workers",
    cut="env",
    roles=(Role("learner", "0", "learning"), Role("env", "rest", "acting")),
    collectives=(
        Collective("allgather", "receive", "env -> learner", "all"),
        Collective("alltoall", "send", "learner -> env", "all"),
    ),
    min_workers=2,
    env_role="env",
    learner_role="learner",
)
