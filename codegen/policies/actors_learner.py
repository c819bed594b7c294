"""``actors-learner``: rank 0 learns; ranks 1..N-1 act with their envs and a policy copy
(Acme, IMPALA, MSRL MultiActorSingleLearner). Cut: the experience partition.

Actors never wait for the learner to finish an update: each sends its rollout one way
and rolls out the next one on the weights exactly ``lag`` updates old (default 1;
``deploy.lag: 0`` is lockstep), never newer ones that happen to have arrived, so that a
run repeats itself from its seed. The learner learns from the rollouts of one iteration
while the actors collect the next; PPO corrects for the lag through the behaviour
log-probabilities its buffer already holds (as APPO does).
"""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="actors-learner",
    summary="rank 0 learner, ranks 1..N-1 actors; actors roll out while the learner learns",
    cut="experience",
    roles=(Role("learner", "0", "learning"), Role("actor", "rest", "acting")),
    edges=(
        Edge("send", "actor", "learner", "send"),
        Edge("weights", "learner", "actor", "publish"),
    ),
    min_workers=2,
    env_role="actor",
    learner_role="learner",
    lag=1,
    max_lag=4,  # PPO's clipped ratio corrects small lags; for more, use async-actors with V-trace
    control="aligned",
)
