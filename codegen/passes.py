"""Graph rewrites from the dataflow graph to the placed FDG: an ordered list of small pure passes.

Each pass takes an :class:`~rlgen.codegen.ir.FDG` and a :class:`Context` and
returns a new FDG; :func:`check_invariants` states what must hold after each.

1. :func:`cut_at_partitions` — every node gets a side of the policy's cut and a
   fragment (env stepping apart from compute, one fragment per role and kind);
2. :func:`insert_transfers` — every value crossing fragments gets a transfer:
   a local hand-over inside a process, or the policy's collective between roles;
3. :func:`fuse_compute` — adjacent compute calls of a fragment become one step
   (one ``tf.function``) when :func:`can_fuse` says so; fused steps keep the calls' names;
4. :func:`fuse_loop` — under ``single`` with an in-graph env, the env joins the compute
   fragment and a whole iteration becomes one step (one ``tf.function``) when
   :func:`loop_fusion_blocker` finds nothing against it;
5. :func:`place_fragments` — ranks, hosts, replicas and process sets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.ir import FDG, Fragment, Port, ProcessSet, RankInfo, Step, Tensor, Transfer
from rlgen.codegen.policies import DistributionPolicy
from rlgen.dsl.catalog import EnvSpaces
from rlgen.dsl.spec import Spec


class CutError(ValueError):
    """The policy cannot cut this spec's loop (message says which partition is missing)."""


@dataclass(frozen=True)
class Context:
    """What the passes read besides the FDG: the spec, the env's spaces and the policy."""

    spec: Spec
    spaces: EnvSpaces
    policy: DistributionPolicy
    hosts: tuple[str, ...] = ()


Pass = Callable[[FDG, Context], FDG]


# --- 1. cut -------------------------------------------------------------------------
def fragment_name(role: str, kind: str) -> str:
    """``agent`` / ``env`` for the single process, ``<role>`` / ``<role>_env`` otherwise."""
    if role == "main":
        return "agent" if kind == "compute" else "env"
    if kind == "env":
        return "env_worker" if role == "env" else f"{role}_env"
    return role


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
    """Envs one replica of a fragment handles: a learner behind a cut sees all of them."""
    envs = ctx.spec.env.num_envs
    if side == "learning":
        return envs
    return envs // ctx.policy.env_workers(workers)


def cut_at_partitions(fdg: FDG, ctx: Context) -> FDG:
    """Give every node a side of the policy's cut and put it in a fragment (one call per step)."""
    partition, sides = _sides(fdg, ctx)
    roles = {r.side: r.name for r in ctx.policy.roles}
    members: dict[str, list] = {}
    meta: dict[str, tuple[str, str, str]] = {}
    for node in fdg.graph.nodes:
        side = sides[node.id]
        role = roles[side]
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


def _single_step(node, siblings) -> Step:
    same = [n for n in siblings if n.block == node.block and n.target == node.target]
    suffix = f"_{same.index(node)}" if len(same) > 1 else ""
    name = f"{node.block}_{node.component}_{node.method}{suffix}"
    return Step(name, node.placement, node.block, (node.id,), node.inputs, node.outputs)


# --- 2. transfers -------------------------------------------------------------------
def _edge_op(ctx: Context, src_role: str, dst_role: str, carries: str | None) -> tuple[str, str]:
    """How a value crosses from ``src_role`` to ``dst_role`` under the policy: (op, process set)."""
    edges = ctx.policy.edges_between(src_role, dst_role)
    if not edges:
        raise CutError(f"policy '{ctx.policy.name}' has nothing crossing from role '{src_role}' to role '{dst_role}'")
    edge = next((e for e in edges if e.carries == carries), edges[0])
    return edge.op, "" if edge.channel else "all"


def lag_of(ctx: Context) -> int:
    """How many updates old the weights an actor acts with may be (``deploy.lag``, else the policy's)."""
    return ctx.spec.deploy.lag if ctx.spec.deploy.lag is not None else ctx.policy.lag


def _carry_sources(fdg: FDG) -> dict[str, tuple[str, str]]:
    """carry target → (source value, block)."""
    return {dst: (src, b.name) for b in fdg.graph.blocks for dst, src in b.carry}


def _crossings(fdg: FDG) -> list[tuple[str, str, str, str]]:
    """(value, producing node, consumer fragment, at) for every use of a value, in loop order."""
    graph = fdg.graph
    order = [b.name for b in graph.blocks]
    carries = _carry_sources(fdg)
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
    for value, producer, dst_name, at in _crossings(fdg):
        src, dst = fdg.fragment_of(producer), fdg.fragment(dst_name)
        if src.name == dst.name:
            continue
        key = (value, src.name, dst.name)
        if key in transfers:
            continue
        if at.startswith("after:") and any(
            t.src == src.name and t.dst == dst.name and t.value == _carry_sources(fdg).get(value, ("",))[0]
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


# --- weights and gradients ----------------------------------------------------------
def network_size(ctx: Context, network: str, output_size: int) -> int | None:
    """Number of parameters of an MLP network (None for a custom one: known only at run time)."""
    net = ctx.spec.networks[network]
    if net.kind != "mlp":
        return None
    sizes = [math.prod(ctx.spaces.observation.shape), *net.hidden, output_size]
    return sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:], strict=True))


#: Output-layer init gain of each head kind (Stable-Baselines3: 0.01 policy, 1.0 value and Q heads).
HEAD_GAIN = {"policy": 0.01, "value": 1.0, "qvalue": 1.0}


def network_heads(ctx: Context, network: str) -> list[tuple[str, int, float]]:
    """``(component, outputs, init gain)`` of each component reading ``network``, in spec
    order: a network shared by a policy and a value has two heads on one torso."""
    act = ctx.spaces.action
    heads = []
    for name in ctx.spec.readers(network):
        comp = ctx.spec.components[name]
        size = 1 if comp.kind == "value" else (act.n if act.kind == "discrete" else math.prod(act.shape))
        if comp.get("distribution") == "squashed_gaussian" and comp.get("gsde") is None:
            size *= 2  # means, then state-dependent log standard deviations (gSDE: means only)
        heads.append((name, size, HEAD_GAIN[comp.kind]))
    return heads


def component_weights(ctx: Context, component: str) -> tuple[Tensor, ...]:
    """The variables of a policy / value / qvalue component, one flat tensor per network."""
    comp = ctx.spec.components[component]
    act = ctx.spaces.action
    out_size = sum(size for _, size, _ in network_heads(ctx, comp.get("network")))
    parts = [Tensor(comp.get("network"), "float32", (network_size(ctx, comp.get("network"), out_size),))]
    if comp.kind == "policy" and act.kind == "box" and comp.get("distribution") in ("auto", "gaussian"):
        parts.append(Tensor(f"{component}_log_std", "float32", (math.prod(act.shape),)))
    elif comp.kind == "policy" and comp.get("gsde") is not None:  # a [features, actions] matrix
        net = ctx.spec.networks[comp.get("network")]
        features = net.hidden[-1] if net.hidden else math.prod(ctx.spaces.observation.shape)
        parts.append(Tensor(f"{component}_log_std", "float32", (features * math.prod(act.shape),)))
    return tuple(parts)


def _weights_of(ctx: Context, components) -> tuple[Tensor, ...]:
    seen: dict[str, Tensor] = {}
    for name in components:
        comp = ctx.spec.components[name]
        if comp.kind in ("policy", "value", "qvalue"):
            for t in component_weights(ctx, name):
                seen.setdefault(t.name, t)
    return tuple(seen.values())


def _weight_transfers(fdg: FDG, ctx: Context, partition) -> tuple[Transfer, ...]:
    graph = fdg.graph
    if fdg.cut == "experience" and partition is not None and partition.receive:
        acting = [f for f in fdg.fragments if f.side == "acting" and f.kind == "compute"]
        learning = [f for f in fdg.fragments if f.side == "learning" and f.kind == "compute"]
        out = []
        for dst in acting:
            comps = dict.fromkeys(graph.node(n).component for n in dst.nodes)
            parts = _weights_of(ctx, comps)
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
            parts = _weights_of(ctx, comps)
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


# --- 3. fusion ----------------------------------------------------------------------
def can_fuse(a: Step, b: Step, fdg: FDG) -> bool:
    """Fuse two steps of one fragment into one compiled call?

    Both are compute, in the same block, and ``b``'s first call comes right after
    ``a``'s last in the loop (nothing of another fragment runs in between).
    """
    if a.kind != "compute" or b.kind != "compute" or a.block != b.block:
        return False
    order = [n.id for n in fdg.graph.nodes]
    return order.index(b.nodes[0]) == order.index(a.nodes[-1]) + 1


def _fuse(a: Step, b: Step, fdg: FDG) -> Step:
    produced = set(a.outputs)
    inputs = a.inputs + tuple(v for v in b.inputs if v not in produced and v not in a.inputs)
    calls = "_".join(f"{fdg.graph.node(n).component}_{fdg.graph.node(n).method}" for n in a.nodes + b.nodes)
    return Step(f"{a.block}_{calls}", "compute", a.block, a.nodes + b.nodes, inputs, a.outputs + b.outputs)


def fuse_compute(fdg: FDG, ctx: Context) -> FDG:
    """Merge adjacent compute steps (see :func:`can_fuse`)."""
    fragments = []
    for frag in fdg.fragments:
        steps: list[Step] = []
        for step in frag.steps:
            if steps and can_fuse(steps[-1], step, fdg):
                steps[-1] = _fuse(steps[-1], step, fdg)
            else:
                steps.append(step)
        fragments.append(dataclasses.replace(frag, steps=tuple(steps)))
    return dataclasses.replace(fdg, fragments=tuple(fragments))


# --- 4. the whole loop in one graph -------------------------------------------------
#: Component kinds whose calls have an in-graph form (a replay buffer lives on the host).
LOOP_KINDS = frozenset({"policy", "value", "rollout", *(k for k, a in ALGORITHMS.items() if a.in_graph)})


def loop_fusion_blocker(fdg: FDG, ctx: Context) -> str | None:
    """Why the iteration cannot be one compiled graph (``None``: it can).

    It can when one process runs everything (``single``), the env is in-graph
    (``backend: tensorflow``), every component has an in-graph form, no block is
    conditional (``every``/``after``), and a repeated block hands later blocks only its
    carried values and a rollout buffer of exactly its length.
    """
    spec, graph = ctx.spec, fdg.graph
    if ctx.policy.name != "single":
        return f"policy {ctx.policy.name} runs the loop over several processes"
    if spec.env.backend != "tensorflow":
        return "the env is stepped on the host (backend: gymnasium)"
    kinds = {spec.components[n.component].kind for n in graph.nodes if n.component != "env"}
    if kinds - LOOP_KINDS:
        return f"component kind(s) {', '.join(sorted(kinds - LOOP_KINDS))} have no in-graph form"
    block_of = {n.id: n.block for n in graph.nodes}
    for block in graph.blocks:
        if block.every > 1 or block.after > 0 or block.every_steps:
            return f"block {block.name} runs conditionally (every/after/every_steps)"
    for edge in graph.edges:
        block = graph.block(block_of[edge.producer]) if edge.producer in block_of else None
        if block is None or block.repeat == 1 or block.name == "init":
            continue
        outside = [c for c in edge.consumers if block_of[c] != block.name]
        if edge.type == "buffer":
            length = edge.parts[0].shape[0]
            if length != block.repeat:
                return f"buffer {edge.name} holds {length} steps, block {block.name} repeats {block.repeat}"
        elif outside:
            return f"value {edge.name} of repeated block {block.name} is used after it"
    return None


def fuse_loop(fdg: FDG, ctx: Context) -> FDG:
    """One fragment, two steps: ``init`` (compiled once) and ``iteration`` (every other
    block: repeated blocks become ``tf.while_loop`` s inside one compiled call)."""
    if fdg.fragments and loop_fusion_blocker(fdg, ctx) is None:
        graph = fdg.graph
        compute = next(f for f in fdg.fragments if f.kind == "compute")
        init = tuple(n.id for n in graph.nodes if n.block == "init")
        rest = tuple(n.id for n in graph.nodes if n.block != "init")
        calls = "_".join(f"{graph.node(n).component}_{graph.node(n).method}" for n in init)
        outputs = tuple(v for n in rest for v in graph.node(n).outputs if graph.edge(v).type == "metrics")
        steps = (
            *((Step(f"init_{calls}", "compute", "init", init, (), ()),) if init else ()),
            Step("iteration", "loop", "loop", rest, (), outputs),
        )
        fused = dataclasses.replace(compute, nodes=init + rest, steps=steps, inputs=(), outputs=())
        transfers = tuple(t for t in fdg.transfers if t.op != "local")
        return dataclasses.replace(fdg, fragments=(fused,), transfers=transfers)
    return fdg


# --- 5. placement -------------------------------------------------------------------
def slots_of(hosts: Sequence[str]) -> int:
    """The slots ``host:slots`` entries offer (an entry without a count offers 1)."""
    return sum(int(slots) if slots.isdigit() else 1 for _, _, slots in (h.rpartition(":") for h in hosts))


def host_of_ranks(hosts: tuple[str, ...], workers: int) -> list[str]:
    """Rank → host, filling each ``host:slots`` in order (``localhost`` when none given)."""
    out: list[str] = []
    for entry in hosts:
        name, _, slots = entry.rpartition(":")
        out += [name or entry] * (int(slots) if slots.isdigit() else 1)
    out += ["localhost"] * (workers - len(out))
    return out[:workers]


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


PASSES: tuple[Pass, ...] = (cut_at_partitions, insert_transfers, fuse_compute, fuse_loop, place_fragments)


def run_passes(fdg: FDG, ctx: Context, passes: tuple[Pass, ...] = PASSES) -> FDG:
    for p in passes:
        fdg = p(fdg, ctx)
    return fdg


# --- invariants ---------------------------------------------------------------------
def check_invariants(fdg: FDG, transfers: bool = True) -> list[str]:
    """What must hold once fragments exist (and, with ``transfers``, once transfers are in);
    returns the violations (empty = fine)."""
    problems = []
    seen: dict[str, str] = {}
    for frag in fdg.fragments:
        for nid in frag.nodes:
            if nid in seen:
                problems.append(f"node {nid} is in fragments {seen[nid]} and {frag.name}")
            seen[nid] = frag.name
        stepped = [n for s in frag.steps for n in s.nodes]
        if sorted(stepped) != sorted(frag.nodes):
            problems.append(f"fragment {frag.name}: steps cover {stepped}, nodes are {list(frag.nodes)}")
    missing = {n.id for n in fdg.graph.nodes} - set(seen)
    problems += [f"node {n} is in no fragment" for n in sorted(missing)]
    if transfers:
        moved = {(t.value, t.src, t.dst) for t in fdg.transfers}
        for value, producer, dst, _ in _crossings(fdg):
            src = fdg.fragment_of(producer).name
            if src != dst and not any(
                m[1] == src and m[2] == dst and m[0] in (value, _src_of(fdg, value)) for m in moved
            ):
                problems.append(f"value {value} crosses {src} -> {dst} without a transfer")
    return problems


def _src_of(fdg: FDG, value: str) -> str:
    return _carry_sources(fdg).get(value, (value, ""))[0]
