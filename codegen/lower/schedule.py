"""Lowering of the rank loops: each role's blocks as an ordered list of operations."""

from __future__ import annotations

import dataclasses

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import Context, fragment_device
from rlgen.codegen.ir import FDG, Fragment, Graph, Step
from rlgen.codegen.lower.boundary import Group
from rlgen.codegen.lower.fragments import class_name, follows_progress, gradient_steps, steps_per_iteration
from rlgen.codegen.plan import ArgPlan, BlockSchedule, FragmentRef, NormalizePlan, NormalizeRef, Op, RolePlan, RunPlan


def lower_role(
    fdg: FDG, ctx: Context, role: str, groups: list[Group], normalizers: dict[str, NormalizePlan | None]
) -> RolePlan:
    """The loop as one role runs it: its steps and its sides of the transfers, in loop order.
    ``normalizers``: each fragment's lowered normalisation (the role refers to its holder's)."""
    graph = fdg.graph
    frags = [f for f in fdg.fragments if f.role == role]
    names = {f.name for f in frags}
    step_at = {s.nodes[0]: (f, s) for f in frags for s in f.steps}
    mine = [g for g in groups if {g.src, g.dst} & names and g.first.value != "gradients"]
    buffers = {e.name for e in graph.edges if e.type == "buffer"}
    memories = {e.name for e in graph.edges if e.type == "buffer" and any(t.name == "first" for t in e.parts)}
    replays = frozenset(n for n, c in ctx.spec.components.items() if c.kind == "replay")
    ops_at: dict[str, list[Op]] = {}
    start: dict[str, Op] = {}
    begin: list[Op] = []
    for g in mine:
        t = g.first
        if t.op == "broadcast":  # rank 0's initial weights
            op = Op("sync", g.dst if g.dst in names else g.src, value=t.value, op=t.op)
            start.setdefault(op.frag, op)
        elif t.op == "publish" and g.src in names:  # the learner: initial weights, then after every update
            start.setdefault(g.src, Op("publish", g.src, value=t.value, op=t.op, peer=g.dst))
            ops_at.setdefault(t.at, []).append(Op("publish", g.src, value=t.value, op=t.op, peer=g.dst))
        elif t.op == "publish":  # an actor: the newest weights at the start of each iteration
            begin.append(Op("pull", g.dst, value=t.value, op=t.op, peer=g.src, lag=t.lag, mode=t.mode))
        else:
            ops_at.setdefault(t.at, []).append(_transfer_op(g, names, buffers, replays, memories))
    known = {v for f in frags for s in f.steps for v in (*s.inputs, *s.outputs)}
    known |= {t.value for g in mine for t in g.transfers}
    received = {t.value for g in mine if g.dst in names for t in g.transfers if t.value in buffers}
    blocks = []
    for block in graph.blocks:
        ops = []
        for node in (n for n in graph.nodes if n.block == block.name):
            if node.id in step_at:
                frag, step = step_at[node.id]
                ops.append(_step_op(fdg, ctx, frag, step, received))
            ops += ops_at.get(node.id, [])
        k = gradient_steps(fdg, block.name)
        blocks.append(
            BlockSchedule(
                name=block.name,
                repeat=1 if k > 1 else block.repeat,
                every=block.every,
                after=block.after,
                every_steps=block.every_steps,
                path=block.path,
                note=f"block {block.name}: {k} gradient steps in one compiled call" if k > 1 and ops else None,
                ops=tuple(ops),
                carry=tuple((dst, src) for dst, src in block.carry if dst in known and src in known),
                after_ops=tuple(ops_at.get(f"after:{block.name}", [])),
                init=block.name == "init",
            )
        )
    if ctx.policy.env_groups > 1:
        blocks = [_grouped(b, ctx.policy.env_groups, frags, graph) for b in blocks]
    loop_step = next((s for f in frags for s in f.steps if s.kind == "loop"), None)
    if loop_step is not None:  # one compiled call runs every block but init
        frag = next(f for f in frags if loop_step in f.steps)
        names_of = ", ".join(b.name for b in graph.blocks if b.name != "init")
        blocks = [b for b in blocks if b.init] + [
            BlockSchedule(
                name="iteration",
                repeat=1,
                every=1,
                after=0,
                path="$.loop",
                note=f"blocks {names_of} as one compiled graph",
                ops=(_step_op(fdg, ctx, frag, loop_step, received),),
                carry=(),
                after_ops=(),
                init=False,
            )
        ]
    learner = next((f for f in frags if f.kind == "compute" and _holds_learner(fdg, f)), None)
    learner_attr = _learner_of(fdg, learner) if learner else None
    learner_kind = ctx.spec.components[learner_attr].kind if learner_attr else None
    learner_comp = ctx.spec.components[learner_attr] if learner_attr else None
    metrics = _metrics_of(fdg, learner) if learner else None
    all_ops = [op for b in blocks for op in (*b.ops, *b.after_ops)] + ops_at.get("end", [])
    normalize = None
    holding = [f for f in frags if (n := normalizers.get(f.name)) is not None and n.holds]
    holder = learner if learner in holding else next(iter(holding), None)  # or an actor's
    if holder is not None:
        held = normalizers[holder.name]
        env_frag = next((f.name for f in frags if f.kind == "env"), None)
        sync = fdg.cut == "gradients" and len(fdg.ranks) > 1
        normalize = NormalizeRef(holder.name, env_frag, sync, held.exchange, held.arrivals)
    versioned = next((g.dst for g in mine if g.dst in names and g.first.op == "send" and _versioned(groups, g)), None)
    placed = [fragment_device(ctx, role, f.kind)[0] for f in frags if f.kind == "compute"]
    device = None if ctx.spec.deploy.devices is None else next(iter(placed), None) or "cpu"
    return RolePlan(
        role=role,
        ranks=tuple(r.rank for r in fdg.ranks if r.role == role),
        fragments=tuple(FragmentRef(f.name, f.name, class_name(f.name), f.kind) for f in frags),
        blocks=tuple(blocks),
        start=tuple(start.values()),
        begin=tuple(begin),
        end=tuple(ops_at.get("end", [])),
        lag_frag=versioned,
        counts_dropped=ctx.policy.asynchronous and versioned is not None,
        open_ended=ctx.policy.asynchronous and any(op.type == "pull" for op in begin),
        env_frag=next((f.name for f in frags if f.kind == "env" or loop_step in f.steps), None),
        learner_frag=learner.name if learner else None,
        learner_attr=learner_attr,
        policy_attr=learner_comp.get(ALGORITHMS[learner_kind].acts) if learner_comp else None,
        policy_call=learner_comp is not None and ALGORITHMS[learner_kind].acts_through_policy,
        metrics_home=learner_kind,
        replicated_learner=learner is not None and len([r for r in fdg.ranks if r.role == role]) > 1,
        metrics=metrics if metrics in known else None,  # the learner's output, whatever its name
        metrics_conditional=metrics is not None
        and any(
            (b.every > 1 or b.after > 0 or b.every_steps) and any(metrics in op.outputs for op in b.ops) for b in blocks
        ),
        uses_progress=any(a.value == "progress" for op in all_ops for a in op.args),
        uses_iteration=any(b.every > 1 for b in graph.blocks if b.name != "init")
        or any(op.mode != "async" for op in begin)  # an overlapped actor's pull: iteration - lag
        or any(op.type == "publish" or (op.type == "recv" and op.mode == "async") for op in all_ops),
        device=device,
        normalize=normalize,
        group_metrics=_group_metrics(fdg, frags, known) if ctx.spaces.groups else None,
        group_policies=_group_policies(fdg, ctx, frags) if ctx.spaces.groups else None,
        policy_copies=_policy_copies(fdg, ctx)
        if ctx.policy.per_group and ctx.spaces.groups and learner is None and any(f.kind == "env" for f in frags)
        else None,
    )


def _group_policies(fdg: FDG, ctx: Context, frags: list[Fragment]) -> tuple[tuple[str, str], ...] | None:
    """(group, acting policy attribute) of every agent group, in ``env.groups`` order, when
    ``frags`` hold every group's learner (else None: the role cannot act for all agents)."""
    acting = _acting(fdg, ctx, frags)
    order = [g.name for g in ctx.spaces.groups]
    return tuple((g, acting[g][1]) for g in order) if set(acting) == set(order) else None


def _policy_copies(fdg: FDG, ctx: Context) -> tuple[tuple[str, str, str, str, int], ...] | None:
    """``agent-groups``' env role: (group, fragment, its class, acting policy attribute, the
    group's rank) of every group, in ``env.groups`` order: rank 0 builds each group's fragment to
    evaluate and export a copy of its policy, given the group's weights (None: a group acts
    through no learner's policy)."""
    acting = _acting(fdg, ctx, list(fdg.fragments))
    order = [g.name for g in ctx.spaces.groups]
    if set(acting) != set(order):
        return None
    rank_of = {f.name: r.rank for f in fdg.fragments for r in fdg.ranks if r.role == f.role}
    return tuple((g, frag, class_name(frag), attr, rank_of[frag]) for g in order for frag, attr in [acting[g]])


def _acting(fdg: FDG, ctx: Context, frags: list[Fragment]) -> dict[str, tuple[str, str]]:
    """group -> (fragment, acting policy attribute) of the group learners ``frags`` hold."""
    graph = fdg.graph
    edges = {e.name: e for e in graph.edges}
    acting: dict[str, tuple[str, str]] = {}
    for f in frags:
        for n in f.nodes:
            node = graph.node(n)
            comp = ctx.spec.components.get(node.component)
            if node.method != "update" or comp is None or comp.kind not in ALGORITHMS:
                continue
            group = next((edges[i].group for i in node.inputs if i in edges and edges[i].group), None)
            policy = comp.get(ALGORITHMS[comp.kind].acts)
            if group is not None and policy is not None:
                acting.setdefault(group, (f.name, policy))
    return acting


def _group_metrics(fdg: FDG, frags: list[Fragment], known: set[str]) -> tuple[tuple[str, str], ...] | None:
    """(group, metrics value) of every learner update the role runs, in loop order."""
    graph = fdg.graph
    out = []
    for f in frags:
        for n in f.nodes:
            node = graph.node(n)
            if node.method != "update":
                continue
            value = next((o for o in node.outputs if graph.edge(o).type == "metrics"), None)
            if value is not None and value in known and graph.edge(value).group:
                out.append((graph.edge(value).group, value))
    if not out and any(f.kind == "env" for f in frags):  # the env's rank alone: the groups' returns
        return ()
    return tuple(out) or None


def _grouped(block: BlockSchedule, env_groups: int, frags: list[Fragment], graph: Graph) -> BlockSchedule:
    """A block that crosses the env cut, run one env group at a time (pipelined inference).

    The env side steps a group's envs as its actions arrive (its env steps take the group);
    the learning side runs the ops before the first receive (``ahead``: inference, sending
    the actions) per group, and the rest on the whole batch. With several agent groups a
    carried value's rows per env group are the group's env copies times its agent group's
    agents (``agents``)."""
    if not any(op.type in ("send", "recv") for op in block.ops):
        return block
    env = next((f for f in frags if f.kind == "env"), None)
    if env is not None:  # the acting side: nothing is carried, the env object holds the state
        ops = tuple(
            dataclasses.replace(op, args=(*op.args, ArgPlan("name", "group"))) if op.lap == "env" else op
            for op in block.ops
        )
        return dataclasses.replace(block, ops=ops, carry=(), env_groups=env_groups, side="acting")
    ahead = next(i for i, op in enumerate(block.ops) if op.type == "recv")
    arrive = next((i for i, op in enumerate(block.ops[ahead:]) if op.type != "recv"), len(block.ops) - ahead)
    learner = next(f for f in frags if f.kind != "env")
    grouped = any(graph.edge(dst).parts[0].rows for dst, _ in block.carry)  # several agent groups
    return dataclasses.replace(
        block,
        env_groups=env_groups,
        side="learning",
        ahead=ahead,
        arrive=arrive,
        rows=learner.batch // env_groups,
        agents=tuple((dst, graph.edge(dst).parts[0].rows) for dst, _ in block.carry) if grouped else None,
    )


def _versioned(groups: list[Group], g: Group) -> bool:
    """Was the experience of channel group ``g`` collected with published weights?"""
    return any(o.first.op == "publish" and o.dst == g.src for o in groups)


def _holds_learner(fdg: FDG, frag: Fragment) -> bool:
    return any(fdg.graph.node(n).method == "update" for n in frag.nodes)


def _learner_of(fdg: FDG, frag: Fragment) -> str:
    """The attribute (component name) of the learner in ``frag``."""
    return next(fdg.graph.node(n).component for n in frag.nodes if fdg.graph.node(n).method == "update")


def _metrics_of(fdg: FDG, frag: Fragment) -> str | None:
    """The value holding the metrics of the learner in ``frag``: the output of its update, found
    by what produces it (the spec may name it anything), or ``None`` if the update's output is unnamed."""
    graph = fdg.graph
    for n in frag.nodes:
        node = graph.node(n)
        if node.method == "update":
            return next((o for o in node.outputs if graph.edge(o).type == "metrics"), None)
    return None


def _step_op(fdg: FDG, ctx: Context, frag: Fragment, step: Step, received: set[str]) -> Op:
    args = []
    for value in step.inputs:
        edge = fdg.graph.edge(value)
        if edge.type == "batch" or (edge.type == "buffer" and value in received):
            args.append(ArgPlan("star", value))
        elif edge.type == "buffer" and any(t.name == "first" for t in edge.parts):
            args.append(ArgPlan("memory", value, frag.name))  # a rollout, then the recurrent networks' memory
        elif edge.type == "buffer":
            args.append(ArgPlan("rollout", value, frag.name))
        else:
            args.append(ArgPlan("name", value))
    nodes = [fdg.graph.node(n) for n in step.nodes]
    if any(follows_progress(ctx, n.component, n.method) for n in nodes) and step.kind in ("compute", "loop"):
        args.append(ArgPlan("name", "progress"))
    return Op("step", frag.name, method=step.name, args=tuple(args), outputs=tuple(step.outputs), lap=_lap(fdg, step))


def _lap(fdg: FDG, step: Step) -> str:
    """Which clock category a step's time is charged to (see rlgen.runtime.clock.CATEGORIES)."""
    if step.kind in ("env", "loop"):
        return step.kind
    if step.kind == "cpu":
        return "buffer"
    if all(fdg.graph.node(n).component == "env" for n in step.nodes):
        return "env"  # a fused fragment's init: env.reset() in the graph
    methods = {fdg.graph.node(n).method for n in step.nodes}
    return "update" if methods & {"update", "sync_target"} else "inference"


def _transfer_op(g: Group, names: set[str], buffers: set[str], replays: frozenset, memories: set[str]) -> Op:
    """One line of the rank loop for a group of transfers (one collective or one message); a
    rollout of recurrent networks (``memories``) goes with its memory."""
    t = g.first
    if g.src in names:
        kinds = {m.value: "memory" if m.value in memories else "rollout" for m in g.transfers if m.value in buffers}
        args = tuple(ArgPlan(kinds.get(m.value, "name"), m.value, m.src) for m in g.transfers)
        return Op("send", g.src, value=g.value, args=args, op=t.op, peer=g.dst, mode=t.mode)
    return Op(
        "recv",
        g.dst,
        value=g.value,
        op=t.op,
        peer=g.src,
        mode=t.mode,
        targets=tuple(m.value for m in g.transfers),
        # a replay buffer lives with the learner: what actors collected goes straight in
        store=tuple(m.value for m in g.transfers if m.value in replays),
    )


def lower_run(fdg: FDG, ctx: Context, threaded_roles: tuple[str, ...] = ()) -> RunPlan:
    """The run's settings (keyword arguments of rlgen.runtime.session.RunConfig)."""
    spec, train = ctx.spec, ctx.spec.train
    per_iteration = steps_per_iteration(ctx)
    obs_dtype = ctx.spaces.observation.dtype if ctx.spaces else "float32"
    return RunPlan(
        name=spec.name,
        total_steps=train.total_steps,
        steps_per_iteration=per_iteration,
        seed=train.seed,
        env={
            "id": spec.env.id,
            "factory": spec.env.factory,
            "kwargs": dict(spec.env.kwargs),
            "max_episode_steps": spec.env.max_episode_steps,
            # tensorflow: evaluated in the graph; envpool: on an envpool pool of whole, unclipped games
            **({"backend": spec.env.backend} if spec.env.backend != "gymnasium" else {}),
            **({"wrappers": [w.as_data() for w in spec.env.wrappers]} if spec.env.wrappers else {}),
            **({"preset": spec.env.preset} if spec.env.preset else {}),  # evaluated as whole, unclipped games
            "obs_shape": list(ctx.spaces.observation.shape) if ctx.spaces else [],
            # uint8 images: the exported policy takes them as they are (the networks scale them)
            **({"obs_dtype": obs_dtype} if obs_dtype != "float32" else {}),
            **(
                {"pettingzoo": spec.env.pettingzoo, "state": spec.env.state, "agents": ctx.spaces.rows}
                if spec.env.multi_agent and ctx.spaces
                else {}
            ),
            **({"groups": {g: list(a) for g, a in spec.env.groups}} if spec.env.groups else {}),
            # several groups: the exported policy takes one batch of observations per group
            **(
                {"obs_shapes": {g.name: list(g.observation.shape) for g in ctx.spaces.groups}}
                if ctx.spaces and len(ctx.spaces.groups) > 1
                else {}
            ),
        },
        stop_mean_return=train.stop.mean_return,
        window=train.stop.window,
        eval_every=train.eval.every,
        eval_episodes=train.eval.episodes,
        eval_deterministic=train.eval.deterministic,
        checkpoint_every=train.checkpoint.every,
        checkpoint_keep=train.checkpoint.keep,
        log_every=train.log.every,
        tensorboard=train.log.tensorboard,
        episode_capacity=per_iteration,
        run_root=train.run_dir,
        threaded_roles=threaded_roles,
        group_checkpoints=_group_roles(fdg) if ctx.policy.per_group else None,
    )


def _group_roles(fdg: FDG) -> tuple[str, ...]:
    """The roles whose ranks hold a learner of their own (agent groups), in rank order."""
    roles = []
    for r in fdg.ranks:
        frags = [f for f in fdg.fragments if f.role == r.role]
        if r.role not in roles and any(f.kind == "compute" and _holds_learner(fdg, f) for f in frags):
            roles.append(r.role)
    return tuple(roles)
