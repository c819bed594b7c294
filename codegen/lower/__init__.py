"""Lowering: the placed FDG → the :class:`~rlgen.codegen.plan.Plan` the templates render.

Passes, in order, each writing typed fields once (templates derive nothing):

1. :func:`~rlgen.codegen.lower.fragments.lower_fragment` — per fragment: networks and
   components (:mod:`~rlgen.codegen.lower.components`, one lowering per kind), compiled
   steps with their signatures, fused blocks, boundary methods
   (:mod:`~rlgen.codegen.lower.boundary`, transfer groups);
2. :func:`~rlgen.codegen.lower.schedule.lower_role` — per role: the loop as operations;
3. :func:`~rlgen.codegen.lower.schedule.lower_run` — the run's settings, with the roles
   whose update is heavy enough for more than one thread
   (:func:`~rlgen.codegen.lower.threads.threaded_roles`).
"""

from __future__ import annotations

from rlgen.codegen.context import Context
from rlgen.codegen.ir import FDG
from rlgen.codegen.lower.boundary import plan_groups
from rlgen.codegen.lower.fragments import lower_fragment
from rlgen.codegen.lower.schedule import lower_role, lower_run
from rlgen.codegen.lower.threads import threaded_roles
from rlgen.codegen.plan import Meta, Plan


def lower(fdg: FDG, ctx: Context, meta: Meta, package: str) -> Plan:
    groups = plan_groups(fdg)
    fragments = tuple(lower_fragment(fdg, ctx, f, groups) for f in fdg.fragments)
    normalizers = {f.name: f.normalize for f in fragments}
    roles = tuple(lower_role(fdg, ctx, role, groups, normalizers) for role in fdg.roles())
    return Plan(
        meta=meta,
        package=package,
        partition=fdg.partition,
        cut=fdg.cut,
        ranks=fdg.ranks,
        process_sets=fdg.process_sets,
        collectives=tuple(t for t in fdg.transfers if t.op != "local"),
        fragments=fragments,
        roles=roles,
        run=lower_run(fdg, ctx, threaded_roles(fragments)),
        control=ctx.policy.control,
        metrics_homes=tuple(dict.fromkeys(r.metrics_home for r in roles if r.metrics and r.metrics_home)),
    )


__all__ = ["lower"]
