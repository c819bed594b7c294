"""``pipelined-inference``: central inference with each env worker's envs in two groups, and
the learner acting for one group while the other group's envs step (SEED RL's pipelining).
Cut: the env partition.

Rank 0 runs inference and learning; ranks 1..N-1 step envs, one group at a time: a group
steps as soon as its actions arrive and sends its results one way; the learner takes a
group's results, acts for that group's next step at once and sends the actions, then
takes the other group's. Inference for one group so overlaps the other group's env
steps, where ``central-inference`` leaves the env workers idle while the learner infers
and the learner idle while they step. Each step costs two inference calls on half the
envs instead of one on all: it pays when env steps cost about as much as inference or
more (MuJoCo), not for a cheap env with a small network. Still on-policy: the weights
change only between iterations, when the pipeline has drained.
"""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="pipelined-inference",
    summary="central inference with two env groups per worker: infer for one while the other steps",
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
    env_groups=2,
)
