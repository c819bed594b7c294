"""The distribution policies. Adding one is one new file here plus one line below."""

from __future__ import annotations

from rlgen.codegen.policies import (
    actors_learner,
    agent_groups,
    async_actors,
    central_inference,
    multi_learner,
    pipelined_inference,
    single,
)
from rlgen.codegen.policies.base import DistributionPolicy, Edge, Role

POLICIES: dict[str, DistributionPolicy] = {
    p.POLICY.name: p.POLICY
    for p in (single, actors_learner, central_inference, pipelined_inference, multi_learner, async_actors, agent_groups)
}

#: Not a policy but a request: ``rlgen run`` profiles the spec and picks one (rlgen.runtime.auto).
AUTO = "auto"


def policy_min_workers(policy: str) -> int:
    """Workers for a policy chosen on the command line without --workers: its minimum."""
    return POLICIES[policy].min_workers if policy in POLICIES else 1


__all__ = ["AUTO", "POLICIES", "DistributionPolicy", "Edge", "Role", "policy_min_workers"]
