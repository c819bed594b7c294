"""Lowering of fragments: each fragment's compiled steps (signatures, calls, fused blocks)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import Context, fragment_device
from rlgen.codegen.ir import FDG, Fragment, Step, Tensor
from rlgen.codegen.lower.boundary import Group, boundary
from rlgen.codegen.lower.components import (
    action_plan,
    component_groups,
    components_of,
    gaussian,
    lower_components,
)
from rlgen.codegen.plan import (
    BoundaryPlan,
    CallPlan,
    EnvPlan,
    FragmentPlan,
    GroupPlan,
    LoopBlockPlan,
    NormalizePlan,
    PortPlan,
    StepPlan,
    TensorPlan,
)
from rlgen.dsl.dataflow import analyze
from rlgen.dsl.memory import state_size, stored_memory


def class_name(fragment: str) -> str:
    return "".join(p.capitalize() for p in fragment.split("_")) + "Fragment"


def tensor(t: Tensor, prefix: str = "") -> TensorPlan:
    return TensorPlan(f"{prefix}_{t.name}" if prefix else t.name, t.dtype, tuple(t.shape), t.batch_axis)


def steps_per_iteration(ctx: Context) -> int:
    """Env steps one iteration takes over all envs (a loop without env.step counts 1)."""
    return max(1, ctx.spec.env.num_envs * (ctx.spec.loop.env_steps_per_env() or 1))


def gradient_steps(fdg: FDG, block: str) -> int:
    """How many minibatches one ``replay.sample()`` call of ``block`` draws: the block's
    ``repeat`` when the block is just ``sample`` then ``update`` (its K gradient steps then
    run in one compiled call on K minibatches drawn at once, as nothing is inserted in
    between), else 1."""
    graph = fdg.graph
    nodes = [n for n in graph.nodes if n.block == block]
    if [n.method for n in nodes] == ["sample", "update"] and nodes[1].inputs == nodes[0].outputs:
        return graph.block(block).repeat
    return 1


def ahead_steps(fdg: FDG, ctx: Context) -> frozenset[str]:
    """Steps the learner runs for one env group at a time, ahead of that group's env step
    (policies with env groups): those of the env step's block that come before it."""
    if ctx.policy.env_groups < 2:
        return frozenset()
    graph = fdg.graph
    order = {n.id: i for i, n in enumerate(graph.nodes)}
    env_steps = [n for n in graph.nodes if n.component == "env" and n.method == "step"]
    return frozenset(
        s.name
        for f in fdg.fragments
        if f.kind != "env"
        for s in f.steps
        if any(s.block == e.block and order[s.nodes[0]] < order[e.id] for e in env_steps)
    )


def _acts(fdg: FDG, ctx: Context, frag: Fragment) -> bool:
    """Whether the fragment is a compute fragment holding what acts, a policy or a Q-network
    (it holds the normaliser)."""
    return frag.kind == "compute" and any(
        ctx.spec.components[c].kind in ("policy", "qvalue") for c in components_of(fdg, ctx, frag)
    )


def normalize_plan(fdg: FDG, ctx: Context, frag: Fragment, bounds: tuple[BoundaryPlan, ...]) -> NormalizePlan | None:
    """``$.env.normalize`` in this fragment: held by the compute fragment that acts (the
    policy's), applied by the env fragment (None: not normalised, or not this fragment's part).
    An off-policy learner's replay keeps raw transitions (``at_use``: normalised where used).
    Across an experience cut the statistics travel with the rollouts and the weights: the
    fragment that pulls weights is an actor's, the one that publishes them the learner's.
    Across an env cut the acting fragment counts the envs' results as they arrive."""
    norm = ctx.spec.env.normalize
    if norm is None or (frag.kind != "env" and not _acts(fdg, ctx, frag)):
        return None
    if frag.kind == "env" and fdg.cut == "env":  # the acting side counts what arrives
        return None
    kinds = {b.kind for b in bounds}
    exchange = None
    if frag.kind != "env" and fdg.cut == "experience":
        exchange = "actor" if "pull" in kinds else "learner" if "publish" in kinds else None
    return NormalizePlan(
        obs=norm.obs,
        reward=norm.reward,
        clip_obs=float(norm.clip_obs),
        clip_reward=float(norm.clip_reward),
        epsilon=float(norm.epsilon),
        gamma=ctx.spec.normalize_gamma(),
        distributed=(fdg.cut == "gradients" and len(fdg.ranks) > 1) or exchange == "actor",
        holds=frag.kind != "env",
        exchange=exchange,
        sums=4 + 2 * math.prod(ctx.spaces.observation.shape) if exchange else None,
        at_use=any(c.kind in ALGORITHMS and ALGORITHMS[c.kind].buffer is None for c in ctx.spec.components.values())
        or None,
        arrivals=fdg.cut == "env" or None,
    )


def lower_fragment(fdg: FDG, ctx: Context, frag: Fragment, groups: list[Group]) -> FragmentPlan:
    spec = ctx.spec
    components, networks = lower_components(fdg, ctx, frag)
    act = ctx.spaces.action
    env = spec.env
    ahead = ahead_steps(fdg, ctx)
    bounds = boundary(fdg, frag, groups, ctx.policy.env_groups)
    device, side = fragment_device(ctx, frag.role, frag.kind)
    return FragmentPlan(
        name=frag.name,
        class_name=class_name(frag.name),
        kind=frag.kind,
        role=frag.role,
        ranks=tuple(r.rank for r in fdg.ranks if r.role == frag.role),
        batch=frag.batch,
        replicas=frag.replicas,
        obs_shape=tuple(ctx.spaces.observation.shape),
        obs_dtype=None if ctx.spaces.observation.dtype == "float32" else ctx.spaces.observation.dtype,
        stream_rank=0 if ctx.policy.per_group and frag.kind == "compute" else None,
        action=action_plan(ctx),
        action_dtype="int32" if act.kind == "discrete" else "float32",
        action_shape=tuple(() if act.kind == "discrete" else act.shape),
        env=EnvPlan(
            env.id,
            env.backend,
            env.factory,
            dict(env.kwargs),
            env.max_episode_steps,
            tuple(w.as_data() for w in env.wrappers) or None,
            env.pettingzoo,
            env.state if env.multi_agent else None,
            ctx.spaces.rows if env.multi_agent else None,
            {g: list(agents) for g, agents in env.groups} if env.groups else None,
            env.preset,
            True if ctx.spec.recurrent else None,
        ),
        networks=networks,
        components=components,
        weights=tuple(n.attr for n in networks),
        log_std=tuple(c.attr for c in components if c.kind == "policy" and gaussian(ctx, c.attr)),
        steps=tuple(_step(fdg, ctx, frag, s, ahead) for s in frag.steps),
        carried=_carried(fdg, frag),
        episode_capacity=steps_per_iteration(ctx),  # enough for one iteration's episodes
        boundary=bounds,
        env_groups=ctx.policy.env_groups if frag.kind == "env" else 1,
        inputs=tuple(PortPlan(p.value, tuple(tensor(t) for t in p.parts)) for p in frag.inputs),
        outputs=tuple(PortPlan(p.value, tuple(tensor(t) for t in p.parts)) for p in frag.outputs),
        normalize=normalize_plan(fdg, ctx, frag, bounds),
        state_shape=tuple(ctx.spaces.state) if ctx.spaces.state else None,
        groups=_groups(fdg, ctx, frag) if ctx.spaces.groups and frag.kind != "env" else None,
        device=device,
        device_side=side,
    )


def _groups(fdg: FDG, ctx: Context, frag: Fragment) -> tuple[GroupPlan, ...]:
    """The constants of the agent groups whose components the fragment holds."""
    group_of = component_groups(ctx)
    held = {group_of[c].suffix for c in components_of(fdg, ctx, frag) if c in group_of}
    out = []
    for g in ctx.spaces.groups:
        if g.suffix not in held:
            continue
        act = g.action
        out.append(
            GroupPlan(
                name=g.name,
                suffix=g.suffix,
                agents=g.agents,
                batch=frag.batch * g.rows,
                obs_shape=tuple(g.observation.shape),
                action=action_plan(ctx, g),
                action_dtype="int32" if act.kind == "discrete" else "float32",
                action_shape=tuple(() if act.kind == "discrete" else act.shape),
            )
        )
    return tuple(out)


def _carried(fdg: FDG, frag: Fragment) -> tuple[TensorPlan, ...]:
    """Values a fused fragment keeps in variables between its compiled calls: those the
    ``init`` block produces for later blocks (carried values are updated at each iteration's end)."""
    if not any(s.kind == "loop" for s in frag.steps):
        return ()
    graph = fdg.graph
    block_of = {n.id: n.block for n in graph.nodes}
    return tuple(
        tensor(e.parts[0])
        for e in graph.edges
        if block_of.get(e.producer) == "init" and any(block_of[c] != "init" for c in e.consumers)
    )


def follows_progress(ctx: Context, component: str, method: str) -> bool:
    """Does a call need training progress: a learner's update (its schedules), ε-greedy
    acting, or a policy that acts at random for its first ``random_steps`` env steps?"""
    if component == "env":
        return False
    comp = ctx.spec.components[component]
    if comp.kind in ALGORITHMS:
        return method == "update"
    return comp.kind == "qvalue" or (comp.kind == "policy" and bool(comp.get("random_steps")))


def _call(fdg: FDG, ctx: Context, node_id: str, step_block: str) -> CallPlan:
    graph = fdg.graph
    node = graph.node(node_id)
    kind = "env" if node.component == "env" else ctx.spec.components[node.component].kind
    options: dict[str, Any] = {}
    if kind in ALGORITHMS and node.method == "update":
        data = node.inputs[0]
        options["buffer_parts"] = [f"{data}_{t.name}" for t in graph.edge(data).parts]
    random_until = _random_until(ctx, node.component)
    if kind == "qvalue":
        options["exploration"] = ctx.resolved["components"][node.component]["exploration"]
        if random_until is not None:  # ε = 1 before it
            options["exploration"] = {**options["exploration"], "random_until": random_until}
    if kind == "policy" and random_until is not None:
        options["random_until"] = random_until
    if kind == "replay" and node.method == "sample":
        options["batches"] = gradient_steps(fdg, node.block)
        options["batch_size"] = int(ctx.spec.components[node.component].get("batch_size"))
    inputs = tuple(node.inputs)
    memory = _memory(ctx, node, kind)
    if memory is not None:  # recurrent networks: their values go by name, not by position
        options["memory"] = memory
        inputs = tuple(a for a in inputs if graph.edge(a).type not in ("first", "hidden"))
    if kind == "rollout" and node.method == "insert":
        inputs = inputs + ("0.0",) * (7 - len(inputs))
    return CallPlan(node.path, node.text, node.component, node.method, kind, inputs, tuple(node.outputs), options)


def _random_until(ctx: Context, component: str) -> float | None:
    """The training progress before which a policy or qvalue with ``random_steps`` acts
    uniformly at random (progress is iterations done / iterations: random in the iterations
    before ``random_steps`` env steps); None without it."""
    comp = ctx.spec.components.get(component)  # None: the env
    steps = comp.get("random_steps") if comp is not None else None
    return int(steps) / max(1, ctx.spec.train.total_steps) if steps else None


def _memory(ctx: Context, node: Any, kind: str) -> dict[str, Any] | None:
    """What a rollout insert stores for recurrent networks (``first`` and the states the policy
    and the value read, None where a side is not recurrent, with their sizes), or what a recurrent
    learner's update reads (the value's state after the rollout, if its value is recurrent)."""
    spec = ctx.spec
    if not spec.recurrent:
        return None
    flow = analyze(spec)
    if kind == "rollout" and node.method == "insert":
        stored = stored_memory(spec, flow, tuple(node.inputs))
        if stored is None:
            return None
        return {"first": stored.first, "policy": stored.policy, "value": stored.value}
    if kind in ALGORITHMS and node.method == "update":
        comp = spec.components[node.component]
        if not any(state_size(spec, comp.get(ref)) for ref in ("policy", "value") if comp.get(ref) in spec.components):
            return None
        hidden = [a for a in node.inputs if a in flow.values and flow.values[a].type == "hidden"]
        return {"value": hidden[0] if hidden else None}
    return None


def _step(fdg: FDG, ctx: Context, frag: Fragment, step: Step, ahead: frozenset[str] = frozenset()) -> StepPlan:
    graph = fdg.graph
    signature: list[TensorPlan] = []
    batch = frag.batch // ctx.policy.env_groups if step.name in ahead else frag.batch  # one env group
    for value in step.inputs:
        edge = graph.edge(value)
        if edge.type == "buffer":
            signature += [tensor(t.with_batch(frag.batch), prefix=value) for t in edge.parts]
        elif edge.type == "batch":  # K sampled minibatches, one gradient step each
            k = gradient_steps(fdg, step.block)
            signature += [
                dataclasses.replace(tensor(t, prefix=value), shape=(k, *t.shape), axis=None) for t in edge.parts
            ]
        else:
            signature.append(tensor(edge.parts[0].with_batch(batch)))
    calls = [_call(fdg, ctx, n, step.block) for n in step.nodes]
    if any(follows_progress(ctx, c.component, c.method) for c in calls):
        signature.append(TensorPlan("progress", "float32", ()))
    blocks: tuple[LoopBlockPlan, ...] = ()
    if step.kind == "loop":
        calls, blocks = _loop_blocks(fdg, ctx, step, calls)
    return StepPlan(
        name=step.name,
        kind=step.kind,
        calls=tuple(calls),
        signature=tuple(signature),
        outputs=tuple(step.outputs),
        produced=tuple(v for c in calls for v in c.outputs),
        # XLA for inference and a fused iteration; an update compiles its own inner function
        # (and may hold Horovod ops).
        jit=step.kind == "loop" or not any(c.method in ("update", "sync_target") for c in calls),
        blocks=blocks,
    )


def _fresh(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``... if the spec already uses that name."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _loop_blocks(
    fdg: FDG, ctx: Context, step: Step, calls: list[CallPlan]
) -> tuple[list[CallPlan], tuple[LoopBlockPlan, ...]]:
    """A fused iteration, block by block: repeated blocks become ``tf.while_loop`` s whose
    state is a step counter, the block's carried values and the rows of the buffers it fills.
    Returns the calls with their row bookkeeping, and the blocks."""
    graph = fdg.graph
    taken = set(ctx.spec.components) | {e.name for e in graph.edges} | {"progress", "self"}
    call_of = dict(zip(step.nodes, calls, strict=True))
    rows_of: dict[str, str] = {}  # buffer -> the local holding its rows
    out = []
    for block in graph.blocks:
        nodes = [n for n in step.nodes if graph.node(n).block == block.name]
        if not nodes:
            continue
        counter = _fresh("t", taken) if block.repeat > 1 else None
        buffers = list(dict.fromkeys(graph.node(n).component for n in nodes if graph.node(n).method == "insert"))
        rows = {b: _fresh(f"{b}_rows", taken) for b in buffers}
        rows_of.update(rows)
        for n in nodes:
            call = call_of[n]
            if call.kind == "rollout":  # index None: row 0 of a one-step block
                call_of[n] = dataclasses.replace(
                    call, options={**call.options, "rows": rows[call.component], "index": counter}
                )
            if call.kind in ALGORITHMS and ALGORITHMS[call.kind].buffer == "rollout":
                call_of[n] = dataclasses.replace(call, options={**call.options, "rows": rows_of[call.inputs[0]]})
        out.append(
            LoopBlockPlan(
                name=block.name,
                path=block.path,
                repeat=block.repeat,
                counter=counter,
                body=_fresh(f"{block.name}_step", taken),
                carry=tuple(block.carry),
                buffers=tuple((b, rows[b]) for b in buffers),
                calls=tuple(call_of[n] for n in nodes),
            )
        )
    return [call_of[n] for n in step.nodes], tuple(out)
