"""Pass 2, transfers: every value crossing fragments gets one, a local hand-over inside a process
or the policy's collective between roles; and the weights and gradients a cut exchanges."""

from __future__ import annotations

import dataclasses

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import Context, CutError, lag_of
from rlgen.codegen.ir import FDG, Fragment, Port, Tensor, Transfer
from rlgen.codegen.weights import weights_of


def _edge_op(ctx: Context, src_role: str, dst_role: str, carries: str | None) -> tuple[str, str]:
    """How a value crosses from ``src_role`` to ``dst_role`` under the policy: (op, process set)."""
    edges = ctx.policy.edges_between(src_role, dst_role)
    if not edges:
        raise CutError(f"policy '{ctx.policy.name}' has nothing crossing from role '{src_role}' to role '{dst_role}'")
    edge = next((e for e in edges if e.carries == carries), edges[0])
    return edge.op, "" if edge.channel else "all"


def carry_sources(fdg: FDG) -> dict[str, tuple[str, str]]:
    """carry target → (source value, block)."""
    return {dst: (src, b.name) for b in fdg.graph.blocks for dst, src in b.carry}


def crossings(fdg: FDG) -> list[tuple[str, str, str, str]]:
    """(value, producing node, consumer fragment, at) for every use of a value, in loop order."""
    graph = fdg.graph
    order = [b.name for b in graph.blocks]
    carries = carry_sources(fdg)
    out = []
    for edge in graph.edges:
        if not edge.producer:
            continue
        at_end = edge.type == "buffer"
        for cid in edge.consumers:
            consumer = graph.node(cid)
            dst = fdg.fragment_of(cid).name
            if edge.name in carries:
                src_value, block = carries[edge.name]
                carried_producer = graph.edge(src_value).producer
                if order.index(consumer.block) > order.index(block):
                    out.append((edge.name, carried_producer, dst, f"after:{block}"))
                    continue
                if consumer.block == block:
                    out.append((src_value, carried_producer, dst, carried_producer))
            block_of_producer = graph.node(edge.producer).block
            at = f"after:{block_of_producer}" if at_end else edge.producer
            out.append((edge.name, edge.producer, dst, at))
    return out


def insert_transfers(fdg: FDG, ctx: Context) -> FDG:
    """A transfer for every value that crosses fragments; collectives where roles differ."""
    partition = ctx.spec.partitions.get(fdg.partition) if fdg.partition else None
    transfers: dict[tuple[str, str, str], Transfer] = {}
    for value, producer, dst_name, at in crossings(fdg):
        src, dst = fdg.fragment_of(producer), fdg.fragment(dst_name)
        if src.name == dst.name:
            continue
        key = (value, src.name, dst.name)
        if key in transfers:
            continue
        if at.startswith("after:") and any(
            t.src == src.name and t.dst == dst.name and t.value == carry_sources(fdg).get(value, ("",))[0]
            for t in transfers.values()
        ):
            continue  # dst already receives the carried source every repetition
        parts = _parts(fdg, value)
        if src.role == dst.role:
            op, pset = "local", src.role
        else:
            carries = None
            if partition is not None:
                carries = "send" if value in partition.send else "receive" if value in partition.receive else None
            op, pset = _edge_op(ctx, src.role, dst.role, carries)
        mode = "async" if ctx.policy.asynchronous and op == "send" else "sync"
        transfers[key] = Transfer(
            value=value,
            src=src.name,
            dst=dst.name,
            op=op,
            at=at,
            process_set=pset,
            partition=fdg.partition if op != "local" else None,
            payload=tuple(p.with_batch(src.batch) for p in parts),
            received=tuple(p.with_batch(_received_batch(op, src, dst)) for p in parts),
            lag=lag_of(ctx) if mode == "async" else 0,
            mode=mode,
        )
    extra = _weight_transfers(fdg, ctx, partition)
    all_transfers = tuple(transfers.values()) + extra
    fragments = tuple(_with_ports(f, all_transfers) for f in fdg.fragments)
    return dataclasses.replace(fdg, transfers=all_transfers, fragments=fragments)


def _received_batch(op: str, src: Fragment, dst: Fragment) -> int:
    return dst.batch if op in ("allgather", "alltoall", "send") else src.batch


def _parts(fdg: FDG, value: str) -> tuple[Tensor, ...]:
    edge = fdg.graph.edge(value)
    return tuple(dataclasses.replace(p, name=value if len(edge.parts) == 1 else p.name) for p in edge.parts)


def _with_ports(fragment: Fragment, transfers: tuple[Transfer, ...]) -> Fragment:
    ins = tuple(Port(t.value, t.received) for t in transfers if t.dst == fragment.name and t.src != t.dst)
    outs = tuple(Port(t.value, t.payload) for t in transfers if t.src == fragment.name and t.src != t.dst)
    return dataclasses.replace(fragment, inputs=ins, outputs=outs)


def _weight_transfers(fdg: FDG, ctx: Context, partition) -> tuple[Transfer, ...]:
    graph = fdg.graph
    if fdg.cut == "experience" and partition is not None and partition.receive:
        acting = [f for f in fdg.fragments if f.side == "acting" and f.kind == "compute"]
        learning = [f for f in fdg.fragments if f.side == "learning" and f.kind == "compute"]
        out = []
        for dst in acting:
            comps = dict.fromkeys(graph.node(n).component for n in dst.nodes)
            parts = weights_of(ctx, comps)
            for src in learning:
                op, pset = _edge_op(ctx, src.role, dst.role, "weights")
                at = "end"  # every iteration, whichever blocks ran
                lag = lag_of(ctx) if op == "publish" else 0
                mode = "async" if ctx.policy.asynchronous else "sync"
                out.append(
                    Transfer("weights", src.name, dst.name, op, at, pset, fdg.partition, parts, parts, lag, mode)
                )
        return tuple(out)
    if fdg.cut == "gradients":
        out = []
        for frag in fdg.fragments:
            if frag.kind != "compute":
                continue
            comps = dict.fromkeys(graph.node(n).component for n in frag.nodes)
            parts = weights_of(ctx, comps)
            op, pset = _collective_for(ctx, "weights")
            out.append(Transfer("weights", frag.name, frag.name, op, "start", pset, fdg.partition, parts, parts))
            for nid in frag.nodes:
                node = graph.node(nid)
                if node.method == "update" and node.kind in ALGORITHMS:
                    op, pset = _collective_for(ctx, "reduce")
                    out.append(
                        Transfer("gradients", frag.name, frag.name, op, f"in:{nid}", pset, fdg.partition, parts, parts)
                    )
        return tuple(out)
    return ()


def _collective_for(ctx: Context, carries: str) -> tuple[str, str]:
    edge = ctx.policy.edge(carries)
    assert edge is not None, f"policy {ctx.policy.name} has no edge carrying {carries}"
    return edge.op, "" if edge.channel else "all"
