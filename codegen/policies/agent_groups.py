"""``agent-groups``: each agent group's actor, critic, buffer and learner on its own rank; the
env on rank 0 (MSRL's per-agent placement, MAPPO with one learner process per team). Cut: the
env partition, in lockstep.

Rank 0 runs only the env fragment: it steps the env with every group's actions and sends each
group its own observations, rewards, flags and state, one message per group and step. Rank
``1 + i`` runs group ``i``'s fragment (the groups in ``env.groups``' order), so a spec with G
groups runs on 1 + G workers. The roles are the spec's groups: :meth:`DistributionPolicy.for_groups`
gives them. Each group's components are seeded and sample as they do under ``single`` (rank 0's
streams), so a run's metrics equal ``single``'s for the same seed.
"""

from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICY = DistributionPolicy(
    name="agent-groups",
    summary="rank 0 steps the env; each agent group's actor, critic, buffer and learner on its own rank",
    cut="env",
    roles=(Role("env", "0", "acting"), Role("group", "rest", "learning")),
    edges=(
        Edge("receive", "env", "group", "send"),
        Edge("send", "group", "env", "send"),
    ),
    min_workers=3,
    env_role="env",
    learner_role="group",
    control="lockstep",
    per_group=True,
)
