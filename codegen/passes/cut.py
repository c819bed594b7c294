"""Pass 1, the cut: every node gets a side of the policy's cut and a fragment (env stepping apart
from compute, one fragment per role and kind, one call per step)."""

from __future__ import annotations

import dataclasses

from rlgen.codegen.context import Context, CutError, fragment_name
from rlgen.codegen.ir import FDG, Fragment, Step


def _sides(fdg: FDG, ctx: Context) -> tuple[str | None, dict[str, str]]:
    nodes = fdg.graph.nodes
    cut = ctx.policy.cut
    if cut is None:
        return None, {n.id: "both" for n in nodes}
    partition = next((p for p in ctx.spec.partitions.values() if p.kind == cut), None)
    if partition is None:
        raise CutError(
            f"policy '{ctx.policy.name}' cuts the loop at a{'n' * (cut[0] in 'ae')} {cut} partition, "
            "but `partitions:` declares none; add one (see docs/language.md, `partitions`)"
        )
    if cut == "env":
        return partition.name, {n.id: "acting" if n.placement == "env" else "learning" for n in nodes}
    if cut == "experience":
        order = [b.name for b in fdg.graph.blocks]
        last = order.index(partition.after)
        return partition.name, {n.id: "acting" if order.index(n.block) <= last else "learning" for n in nodes}
    return partition.name, {n.id: "both" for n in nodes}


def fragment_batch(ctx: Context, side: str, workers: int) -> int:
    """Rows one replica of a fragment handles (envs, times agents for a multi-agent env): a
    learner behind a cut sees all of them. With several agent groups the batch counts env copies
    (each group's tensors know their rows, see :class:`~rlgen.codegen.ir.Tensor`)."""
    envs = ctx.spec.env.num_envs
    rows = ctx.spaces.rows if ctx.spaces and not ctx.spaces.groups else 1
    if side == "learning":
        return envs * rows
    return envs // ctx.policy.env_workers(workers) * rows


def cut_at_partitions(fdg: FDG, ctx: Context) -> FDG:
    """Give every node a side of the policy's cut and put it in a fragment (one call per step)."""
    partition, sides = _sides(fdg, ctx)
    roles = {r.side: r.name for r in ctx.policy.roles}
    groups = _node_groups(fdg) if ctx.policy.per_group else {}
    members: dict[str, list] = {}
    meta: dict[str, tuple[str, str, str]] = {}
    for node in fdg.graph.nodes:
        side = sides[node.id]
        role = groups.get(node.id, roles[side]) if side == "learning" else roles[side]
        kind = "env" if node.placement == "env" else "compute"
        name = fragment_name(role, kind)
        members.setdefault(name, []).append(node)
        meta[name] = (kind, role, side)
    fragments = []
    for name, nodes in members.items():
        kind, role, side = meta[name]
        steps = tuple(_single_step(n, nodes) for n in nodes)
        fragments.append(
            Fragment(
                name=name,
                kind=kind,
                role=role,
                side=side,
                batch=fragment_batch(ctx, side, fdg.workers),
                nodes=tuple(n.id for n in nodes),
                steps=steps,
            )
        )
    return dataclasses.replace(
        fdg,
        partition=partition,
        cut=ctx.policy.cut,
        sides=tuple(sides.items()),
        fragments=tuple(fragments),
    )


def _node_groups(fdg: FDG) -> dict[str, str]:
    """node → the agent group of the values it reads or writes (``agent-groups``' roles)."""
    out: dict[str, str] = {}
    for edge in fdg.graph.edges:
        if edge.group is None:
            continue
        for nid in (edge.producer, *edge.consumers):
            if nid and fdg.graph.node(nid).placement != "env":
                out.setdefault(nid, edge.group)
    return out


def _single_step(node, siblings) -> Step:
    same = [n for n in siblings if n.block == node.block and n.target == node.target]
    suffix = f"_{same.index(node)}" if len(same) > 1 else ""
    name = f"{node.block}_{node.component}_{node.method}{suffix}"
    return Step(name, node.placement, node.block, (node.id,), node.inputs, node.outputs)
