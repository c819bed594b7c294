"""``central-inference``: rank 0 runs inference and learning; ranks 1..N-1 only step envs
(SEED RL, MSRL SingleActorLearnerMultiEnv). Cut: the env partition.

Actions and observations travel one way over channels, one message per env worker
and step; each env worker steps as soon as its actions arrive, so the workers step in
parallel while the learner acts for the next one's envs.
"""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="central-inference",
    summary="rank 0 inference + learning, ranks 1..N-1 env workers",
    cut="env",
    roles=(Role("learner", "0", "learning"), Role("env", "rest", "acting")),
    edges=(
        Edge("receive", "env", "learner", "send"),
        Edge("send", "learner", "env", "send"),
    ),
    min_workers=2,
    env_role="env",
    learner_role="learner",
    control="lockstep",
)
