"""Passes 3 and 4, fusion: adjacent compute calls of a fragment become one step (one
``tf.function``) when :func:`can_fuse` says so, fused steps keeping the calls' names; and under
``single`` with an in-graph env the whole iteration becomes one step when
:func:`loop_fusion_blocker` finds nothing against it."""

from __future__ import annotations

import dataclasses

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import Context
from rlgen.codegen.ir import FDG, Step


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
        return f"the env is stepped on the host (backend: {spec.env.backend})"
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
