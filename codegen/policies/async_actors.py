"""``async-actors``: rank 0 learns; ranks 1..N-1 act and never wait for the learner
(MSRL AsyncMultiActorSingleLearner, IMPALA, A3C's actors). Cut: the experience partition.

Each actor rolls out on the newest weights that have reached it and sends the rollout
one way; at most two of its rollouts are on their way or waiting at the learner (so
memory stays bounded). The learner takes rollouts as they arrive, from any actor, one
iteration's worth at a time (as many as there are actors), and drops any collected with
weights more than ``lag`` updates older than its own (default 4): staleness is bounded
and logged (``policy_lag``, ``dropped``). The learner's off-policy correction is its own
(``correction`` of ppo/a2c: the PPO ratio, or V-trace).
"""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="async-actors",
    summary="rank 0 learner, ranks 1..N-1 actors that never wait; rollouts taken as they arrive",
    cut="experience",
    roles=(Role("learner", "0", "learning"), Role("actor", "rest", "acting")),
    edges=(
        Edge("send", "actor", "learner", "send"),
        Edge("weights", "learner", "actor", "publish"),
    ),
    min_workers=2,
    env_role="actor",
    learner_role="learner",
    lag=4,
    max_lag=8,
    control="stream",
    asynchronous=True,
)
