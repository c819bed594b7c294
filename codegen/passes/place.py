"""Pass 5, placement: ranks (role, host, fragments), replicas per fragment, and the process sets
the transfers use."""

from __future__ import annotations

import dataclasses

from rlgen.codegen.context import Context
from rlgen.codegen.ir import FDG, ProcessSet, RankInfo
from rlgen.dsl.hosts import host_of_ranks


def place_fragments(fdg: FDG, ctx: Context) -> FDG:
    """Ranks (role, host, fragments), replicas per fragment, and the process sets used."""
    role_of = ctx.policy.placement(fdg.workers)
    hosts = host_of_ranks(ctx.hosts, fdg.workers)
    ranks = tuple(
        RankInfo(rank, role, hosts[rank], tuple(f.name for f in fdg.fragments if f.role == role))
        for rank, role in role_of.items()
    )
    counts = {role: sum(1 for r in role_of.values() if r == role) for role in role_of.values()}
    fragments = tuple(dataclasses.replace(f, replicas=counts.get(f.role, 0)) for f in fdg.fragments)
    sets = {}
    for t in fdg.transfers:
        if t.op == "local" or not t.process_set:  # a plain call, or a channel between two ranks
            continue
        members = tuple(r for r, role in role_of.items() if t.process_set in ("all", role))
        sets[t.process_set] = ProcessSet(t.process_set, members)
    return dataclasses.replace(fdg, ranks=ranks, fragments=fragments, process_sets=tuple(sets[k] for k in sorted(sets)))
