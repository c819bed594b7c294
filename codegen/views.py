"""What the templates see: plain data about each fragment and each role, built from the FDG.

Nothing here writes code; it gathers names (checked later by the ``ident`` filter)
and values (rendered by the ``literal`` filter) in the order the code shows them.
"""

from __future__ import annotations

import math
from typing import Any

from rlgen.codegen.ir import FDG, Fragment, Tensor, Transfer
from rlgen.codegen.passes import Context, component_weights, network_heads
from rlgen.dsl.spec import resolved

#: Fields of a dqn component that configure rlgen.runtime.dqn.DQNConfig.
DQN_KEYS = ("lr", "gamma", "tau", "double", "max_grad_norm", "optimizer")
#: The module whose METRICS name a learner kind's metrics vector.
METRICS_MODULE = {"ppo": "ppo", "a2c": "ppo", "dqn": "dqn"}
#: A2C is PPO's update with one epoch over the whole rollout and no clipping:
#: at ratio 1 the clipped surrogate's gradient is exactly A2C's policy gradient.
A2C_AS_PPO = {"epochs": 1, "clip": 1.0e9, "clip_value": None}


def class_name(fragment: str) -> str:
    return "".join(p.capitalize() for p in fragment.split("_")) + "Fragment"


def _tensor(t: Tensor, prefix: str = "") -> dict[str, Any]:
    name = f"{prefix}_{t.name}" if prefix else t.name
    return {"name": name, "dtype": t.dtype, "shape": list(t.shape), "axis": t.batch_axis}


def action_spec(ctx: Context) -> dict[str, Any]:
    act = ctx.spaces.action
    if act.kind == "discrete":
        return {"n": act.n}
    size = math.prod(act.shape)
    low = None if act.low is None else tuple([float(act.low)] * size)
    high = None if act.high is None else tuple([float(act.high)] * size)
    return {"shape": tuple(act.shape), "low": low, "high": high}


def _components_of(fdg: FDG, ctx: Context, frag: Fragment) -> list[str]:
    """Components the fragment's calls use, plus those they refer to (a learner's policy/value)."""
    names = list(dict.fromkeys(fdg.graph.node(n).component for n in frag.nodes))
    out: list[str] = []
    while names:
        name = names.pop(0)
        if name in out or name == "env":
            continue
        comp = ctx.spec.components[name]
        refs = [comp.get(k) for k in ("policy", "value", "q") if comp.get(k) in ctx.spec.components]
        names = refs + names
        if name not in out:
            out.append(name)
    order = list(ctx.spec.components)
    return sorted(out, key=order.index)


def _learner_config(ctx: Context, name: str, frag: Fragment, learners: int, steps: int) -> dict:
    plain = resolved(ctx.spec)["components"][name]
    keys = (
        "lr",
        "gamma",
        "gae_lambda",
        "clip",
        "clip_value",
        "epochs",
        "minibatch",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "normalize_advantage",
        "optimizer",
    )
    cfg = {k: plain[k] for k in keys if k in plain}
    if plain["kind"] == "a2c":
        cfg.update(A2C_AS_PPO, minibatch=steps * frag.batch)
    else:
        cfg["minibatch"] = int(cfg["minibatch"]) // learners
    return cfg


def fragment_view(fdg: FDG, ctx: Context, frag: Fragment) -> dict[str, Any]:
    spec, graph = ctx.spec, fdg.graph
    plain = resolved(spec)
    comps = _components_of(fdg, ctx, frag)
    nets: list[str] = []
    components = []
    learners = ctx.policy.learner_workers(fdg.workers) if fdg.cut == "gradients" else 1
    reduce = any(t.op == "allreduce" and t.src == frag.name for t in fdg.transfers)
    buffer_len = {e.name: e.parts[0].shape[0] for e in graph.edges if e.type == "buffer"}
    for i, name in enumerate(comps):
        comp = spec.components[name]
        entry: dict[str, Any] = {"attr": name, "kind": comp.kind, "seed": 100 + i}
        if comp.kind in ("policy", "value", "qvalue"):
            net = comp.get("network")
            if net not in nets:
                nets.append(net)
            entry["network"] = net
            if comp.kind == "qvalue":
                entry["exploration"] = plain["components"][name]["exploration"]
            if comp.kind == "policy":
                entry["kwargs"] = {
                    "distribution": comp.get("distribution"),
                    "log_std_init": float(comp.get("log_std_init")),
                }
        elif comp.kind == "rollout":
            entry["length"] = buffer_len[name]
        elif comp.kind == "replay":
            samples = any(graph.node(n).component == name and graph.node(n).method == "sample" for n in frag.nodes)
            entry.update(
                capacity=int(comp.get("capacity")),
                batch_size=int(comp.get("batch_size")),
                stage=None if samples else buffer_len[name],  # an actor's side: stage, send to the learner
            )
        elif comp.kind == "dqn":
            entry.update(
                q=comp.get("q"),
                config={k: plain["components"][name][k] for k in DQN_KEYS if k in plain["components"][name]},
                reduce=reduce,
            )
        elif comp.kind in ("ppo", "a2c"):
            buffer = next(e.name for e in graph.edges if e.type == "buffer")
            entry.update(
                policy=comp.get("policy"),
                value=comp.get("value"),
                steps=buffer_len[buffer],
                config=_learner_config(ctx, name, frag, learners, buffer_len[buffer]),
                reduce=reduce,
            )
        components.append(entry)
    networks = []
    for n in sorted(nets):
        heads = network_heads(ctx, n)
        sizes, gains = [h[1] for h in heads], [h[2] for h in heads]
        networks.append(
            {
                "attr": n,
                "config": plain["networks"][n],
                "output_size": sizes if len(heads) > 1 else sizes[0],
                "gain": gains if len(heads) > 1 else gains[0],
                "seed": 1 + sorted(spec.networks).index(n),
            }
        )
        if len(heads) > 1:  # a shared torso: each component reads its own head
            start = 0
            for comp_name, size, _ in heads:
                entry = next((c for c in components if c["attr"] == comp_name), None)
                if entry is not None:
                    entry["head"] = (start, start + size) if entry["kind"] == "policy" else start
                start += size
    weights = [n for n in sorted(nets)]
    log_std = [c["attr"] for c in components if c["kind"] == "policy" and _gaussian(ctx, c["attr"])]
    return {
        "name": frag.name,
        "class_name": class_name(frag.name),
        "kind": frag.kind,
        "role": frag.role,
        "ranks": [r.rank for r in fdg.ranks if r.role == frag.role],
        "batch": frag.batch,
        "replicas": frag.replicas,
        "obs_shape": tuple(ctx.spaces.observation.shape),
        "action": action_spec(ctx),
        "action_dtype": "int32" if ctx.spaces.action.kind == "discrete" else "float32",
        "action_shape": tuple(() if ctx.spaces.action.kind == "discrete" else ctx.spaces.action.shape),
        "networks": networks,
        "components": components,
        "weights": weights,
        "log_std": log_std,
        "steps": [_step_view(fdg, ctx, frag, s) for s in frag.steps],
        "fused": any(s.kind == "loop" for s in frag.steps),
        "carried": _carried(fdg, frag),
        "episode_capacity": _steps_per_iteration(ctx),  # enough for one iteration's episodes
        "boundary": _boundary(fdg, frag),
        "env": _env_view(ctx),
        "inputs": [_port(p) for p in frag.inputs],
        "outputs": [_port(p) for p in frag.outputs],
    }


def _carried(fdg: FDG, frag: Fragment) -> list[dict[str, Any]]:
    """Values a fused fragment keeps in variables between its compiled calls: those the
    ``init`` block produces for later blocks (carried values are updated at each iteration's end)."""
    if not any(s.kind == "loop" for s in frag.steps):
        return []
    graph = fdg.graph
    block_of = {n.id: n.block for n in graph.nodes}
    return [
        _tensor(e.parts[0])
        for e in graph.edges
        if block_of.get(e.producer) == "init" and any(block_of[c] != "init" for c in e.consumers)
    ]


def _fresh(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``... if the spec already uses that name."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _loop_blocks(fdg: FDG, ctx: Context, step, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fused iteration, block by block: repeated blocks become ``tf.while_loop`` s whose
    state is a step counter, the block's carried values and the rows of the buffers it fills."""
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
            if call["kind"] == "rollout":
                call["rows"], call["index"] = rows[call["component"]], counter  # None: row 0 of a one-step block
            if call["kind"] in ("ppo", "a2c"):
                call["rows"] = rows_of[call["inputs"][0]]
        out.append(
            {
                "name": block.name,
                "path": block.path,
                "repeat": block.repeat,
                "counter": counter,
                "body": _fresh(f"{block.name}_step", taken),
                "carry": list(block.carry),
                "buffers": [{"name": b, "rows": rows[b]} for b in buffers],
                "calls": [call_of[n] for n in nodes],
            }
        )
    return out


def _gaussian(ctx: Context, component: str) -> bool:
    return len(component_weights(ctx, component)) > 1


def _port(port) -> dict[str, Any]:
    return {"value": port.value, "parts": [_tensor(t) for t in port.parts]}


def _env_view(ctx: Context) -> dict[str, Any]:
    env = ctx.spec.env
    return {
        "id": env.id,
        "backend": env.backend,
        "factory": env.factory,
        "kwargs": dict(env.kwargs),
        "max_episode_steps": env.max_episode_steps,
    }


def _step_view(fdg: FDG, ctx: Context, frag: Fragment, step) -> dict[str, Any]:
    graph = fdg.graph
    nodes = [graph.node(n) for n in step.nodes]
    signature: list[dict[str, Any]] = []
    params: list[str] = []
    for value in step.inputs:
        edge = graph.edge(value)
        if edge.type == "buffer":
            for t in edge.parts:
                signature.append(_tensor(t.with_batch(frag.batch), prefix=value))
        elif edge.type == "batch":  # K sampled minibatches, one gradient step each
            k = gradient_steps(fdg, step.block)
            for t in edge.parts:
                signature.append({**_tensor(t, prefix=value), "shape": [k, *t.shape], "axis": None})
        else:
            signature.append(_tensor(edge.parts[0].with_batch(frag.batch)))
    calls = []
    for node in nodes:
        kind = "env" if node.component == "env" else ctx.spec.components[node.component].kind
        call = {
            "path": node.path,
            "text": node.text,
            "component": node.component,
            "method": node.method,
            "kind": kind,
            "inputs": list(node.inputs),
            "outputs": list(node.outputs),
        }
        if kind in ("ppo", "a2c", "dqn") and node.method == "update":
            data = node.inputs[0]
            call["buffer_parts"] = [f"{data}_{t.name}" for t in graph.edge(data).parts]
        if (kind in ("ppo", "a2c", "dqn") and node.method == "update") or kind == "qvalue":
            signature.append({"name": "progress", "dtype": "float32", "shape": [], "axis": None})
        if kind == "qvalue":
            call["exploration"] = resolved(ctx.spec)["components"][node.component]["exploration"]
        if kind == "replay" and node.method == "sample":
            comp = ctx.spec.components[node.component]
            call["batches"], call["batch_size"] = gradient_steps(fdg, node.block), int(comp.get("batch_size"))
        if kind == "rollout" and node.method == "insert":
            call["inputs"] = list(node.inputs) + ["0.0"] * (7 - len(node.inputs))
        calls.append(call)
    params = [s["name"] for s in signature]
    return {
        "name": step.name,
        "kind": step.kind,
        "calls": calls,
        "signature": signature,
        "params": params,
        "outputs": list(step.outputs),
        "produced": [v for c in calls for v in c["outputs"]],
        "blocks": _loop_blocks(fdg, ctx, step, calls) if step.kind == "loop" else [],
        # XLA for inference and a fused iteration; an update compiles its own inner function
        # (and may hold Horovod ops).
        "jit": step.kind == "loop" or not any(c["method"] in ("update", "sync_target") for c in calls),
    }


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


def transfer_groups(transfers) -> list[tuple[Transfer, ...]]:
    """Transfers that travel together: allgathers at the same point between the same
    fragments share one packed collective (see rlgen.runtime.comm.gather_packed)."""
    groups: dict[tuple, list[Transfer]] = {}
    for i, t in enumerate(transfers):
        key = (t.at, t.src, t.dst, t.op) if t.op == "allgather" else (i,)
        groups.setdefault(key, []).append(t)
    return [tuple(g) for g in groups.values()]


def _packed(group: tuple[Transfer, ...]) -> bool:
    return len(group) > 1 or len(group[0].payload) > 1


def _boundary(fdg: FDG, frag: Fragment) -> list[dict[str, Any]]:
    out = []
    role_of = {r.rank: r.role for r in fdg.ranks}
    mine = [t for t in fdg.transfers if t.op != "local" and frag.name in (t.src, t.dst)]
    for group in transfer_groups(mine):
        t = group[0]
        dst_role = fdg.fragment(t.dst).role
        splits = [fdg.fragment(t.dst).batch if role_of[r] == dst_role else 0 for r in sorted(role_of)]
        if t.op in ("broadcast",) or t.value == "gradients":
            if t.op == "broadcast":
                out.append(
                    {
                        "kind": "sync",
                        "value": t.value,
                        "op": t.op,
                        "at": t.at,
                        "peer": t.src if t.dst == frag.name else t.dst,
                    }
                )
            continue
        direction = "send" if t.src == frag.name else "recv"
        values, parts, index = [], [], 0
        for member in group:
            n = len(member.payload)
            values.append({"name": member.value, "tuple": n > 1, "start": index, "stop": index + n})
            parts.extend(_tensor(p) for p in member.payload)
            index += n
        out.append(
            {
                "kind": direction,
                "packed": _packed(group),
                "value": "_".join(v["name"] for v in values),
                "members": values,
                "label": ", ".join(v["name"] for v in values),
                "op": t.op,
                "at": t.at,
                "peer": t.dst if direction == "send" else t.src,
                "splits": splits,
                "parts": parts,
                "tuple": len(t.payload) > 1,
                "received": [_tensor(p) for p in t.received],
            }
        )
    return out


# --- the rank entry -----------------------------------------------------------------
def _fragment_var(frag: str) -> str:
    return frag


def role_schedule(fdg: FDG, ctx: Context, role: str) -> dict[str, Any]:
    """The loop as one role runs it: its steps and its sides of the collectives, in loop order."""
    graph = fdg.graph
    frags = [f for f in fdg.fragments if f.role == role]
    names = {f.name for f in frags}
    step_at = {s.nodes[0]: (f, s) for f in frags for s in f.steps}
    transfers_at: dict[str, list[Transfer]] = {}
    for t in fdg.transfers:
        if t.op == "local" or t.value == "gradients" or not ({t.src, t.dst} & names):
            continue
        transfers_at.setdefault(t.at, []).append(t)
    known = {v for f in frags for s in f.steps for v in (*s.inputs, *s.outputs)}
    known |= {t.value for ts in transfers_at.values() for t in ts}
    received_buffers = {
        t.value
        for ts in transfers_at.values()
        for t in ts
        if t.dst in names and any(e.name == t.value and e.type == "buffer" for e in graph.edges)
    }
    replays = frozenset(n for n, c in ctx.spec.components.items() if c.kind == "replay")
    blocks = []
    for block in graph.blocks:
        items = []
        for node in (n for n in graph.nodes if n.block == block.name):
            if node.id in step_at:
                frag, step = step_at[node.id]
                items.append(_call_item(fdg, frag, step, received_buffers))
            for group in transfer_groups(transfers_at.get(node.id, [])):
                items.append(_transfer_item(group, names, graph, replays))
        carry = [(dst, src) for dst, src in block.carry if dst in known and src in known]
        k = gradient_steps(fdg, block.name)
        after = [
            _transfer_item(g, names, graph, replays)
            for g in transfer_groups(transfers_at.get(f"after:{block.name}", []))
        ]
        blocks.append(
            {
                "name": block.name,
                "repeat": 1 if k > 1 else block.repeat,
                "every": block.every,
                "after": block.after,
                "path": block.path,
                "note": f"block {block.name}: {k} gradient steps in one compiled call" if k > 1 and items else None,
                "ops": items,
                "carry": carry,
                "after_ops": after,
                "init": block.name == "init",
            }
        )
    loop_step = next((s for f in frags for s in f.steps if s.kind == "loop"), None)
    if loop_step is not None:  # one compiled call runs every block but init
        frag = next(f for f in frags if loop_step in f.steps)
        item = _call_item(fdg, frag, loop_step, received_buffers)
        names_of = ", ".join(b.name for b in graph.blocks if b.name != "init")
        blocks = [b for b in blocks if b["init"]] + [
            {
                "name": "iteration",
                "repeat": 1,
                "every": 1,
                "after": 0,
                "path": "$.loop",
                "note": f"blocks {names_of} as one compiled graph",
                "ops": [item],
                "carry": [],
                "after_ops": [],
                "init": False,
            }
        ]
    start = [
        _transfer_item((t,), names, graph) for t in fdg.transfers if t.op == "broadcast" and ({t.src, t.dst} & names)
    ]
    start = [dict(s) for s in {s["frag"]: s for s in start}.values()]
    uses_progress = any(a.get("name") == "progress" for b in blocks for op in b["ops"] for a in op.get("args", []))
    learner_frag = next((f for f in frags if f.kind == "compute" and _holds_learner(fdg, f)), None)
    learner_kind = ctx.spec.components[_learner_of(fdg, learner_frag)].kind if learner_frag else None
    metrics = _metrics_of(fdg, learner_frag) if learner_frag else None
    return {
        "role": role,
        "env_frag": next((f.name for f in frags if f.kind == "env" or loop_step in f.steps), None),
        "learner_frag": learner_frag.name if learner_frag else None,
        "policy_attr": _policy_of_learner(fdg, ctx, learner_frag) if learner_frag else None,
        "policy_call": learner_kind == "dqn",  # a Q-network becomes a policy through .policy()
        "learner_attr": _learner_of(fdg, learner_frag) if learner_frag else None,
        "metrics_module": METRICS_MODULE.get(learner_kind),
        "replicated_learner": bool(learner_frag) and len([r for r in fdg.ranks if r.role == role]) > 1,
        "fragments": [
            {
                "var": _fragment_var(f.name),
                "module": f.name,
                "class_name": class_name(f.name),
                "kind": f.kind,
                "takes_rank": f.kind == "env" or any(s.kind == "loop" for s in f.steps),
            }
            for f in frags
        ],
        "ranks": [r.rank for r in fdg.ranks if r.role == role],
        "blocks": blocks,
        "start": start,
        "metrics": metrics if metrics in known else None,  # the learner's output, whatever its name
        "metrics_conditional": metrics is not None
        and any(
            (b["every"] > 1 or b["after"] > 0) and any(metrics in op.get("outputs", ()) for op in b["ops"])
            for b in blocks
        ),
        "uses_progress": uses_progress,
        "uses_iteration": any(b.every > 1 for b in graph.blocks if b.name != "init"),
    }


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


def _policy_of_learner(fdg: FDG, ctx: Context, frag: Fragment) -> str | None:
    """The attribute (component name) of the policy (or Q-network) trained by the learner in ``frag``."""
    comp = ctx.spec.components[_learner_of(fdg, frag)]
    return comp.get("policy") or comp.get("q")


def _steps_per_iteration(ctx: Context) -> int:
    """Env steps one iteration takes over all envs (a loop without env.step counts 1)."""
    return max(1, ctx.spec.env.num_envs * (ctx.spec.loop.env_steps_per_env() or 1))


def run_config(fdg: FDG, ctx: Context) -> dict[str, Any]:
    """Keyword arguments of rlgen.runtime.session.RunConfig for this build."""
    spec = ctx.spec
    train = spec.train
    obs_shape = list(ctx.spaces.observation.shape) if ctx.spaces else []
    per_iteration = _steps_per_iteration(ctx)
    return {
        "name": spec.name,
        "total_steps": train.total_steps,
        "steps_per_iteration": per_iteration,
        "seed": train.seed,
        "env": {
            "id": spec.env.id,
            "factory": spec.env.factory,
            "kwargs": dict(spec.env.kwargs),
            "max_episode_steps": spec.env.max_episode_steps,
            "obs_shape": obs_shape,
        },
        "stop_mean_return": train.stop.mean_return,
        "window": train.stop.window,
        "eval_every": train.eval.every,
        "eval_episodes": train.eval.episodes,
        "eval_deterministic": train.eval.deterministic,
        "checkpoint_every": train.checkpoint.every,
        "checkpoint_keep": train.checkpoint.keep,
        "log_every": train.log.every,
        "tensorboard": train.log.tensorboard,
        "episode_capacity": per_iteration,
    }


def _call_item(fdg: FDG, frag: Fragment, step, received_buffers: set[str]) -> dict[str, Any]:
    args = []
    for value in step.inputs:
        edge = fdg.graph.edge(value)
        if edge.type == "batch":
            args.append({"star": value})
        elif edge.type != "buffer":
            args.append({"name": value})
        elif value in received_buffers:
            args.append({"star": value})
        else:
            args.append({"rollout": value, "frag": frag.name})
    acts = any(fdg.graph.node(n).kind == "qvalue" for n in step.nodes)  # ε follows training progress
    if (acts or any(fdg.graph.node(n).method == "update" for n in step.nodes)) and step.kind in ("compute", "loop"):
        args.append({"name": "progress"})
    return {
        "type": "step",
        "frag": frag.name,
        "method": step.name,
        "args": args,
        "outputs": list(step.outputs),
        "lap": _lap_category(fdg, step),
    }


def _lap_category(fdg: FDG, step) -> str:
    """Which clock category a step's time is charged to (see rlgen.runtime.session.CATEGORIES)."""
    if step.kind in ("env", "loop"):
        return step.kind
    if step.kind == "cpu":
        return "buffer"
    if all(fdg.graph.node(n).component == "env" for n in step.nodes):
        return "env"  # a fused fragment's init: env.reset() in the graph
    methods = {fdg.graph.node(n).method for n in step.nodes}
    return "update" if methods & {"update", "sync_target"} else "inference"


def _transfer_item(
    group: tuple[Transfer, ...], names: set[str], graph, replays: frozenset = frozenset()
) -> dict[str, Any]:
    """One line of the rank loop for a group of transfers (one collective)."""
    t = group[0]
    if t.op == "broadcast":
        frag = t.dst if t.dst in names else t.src
        return {"type": "sync", "frag": frag, "value": t.value, "op": t.op}
    suffix = "_".join(m.value for m in group)
    if t.src in names:
        args = [
            {"name": m.value, "buffer": any(e.name == m.value and e.type == "buffer" for e in graph.edges)}
            for m in group
        ]
        return {"type": "send", "frag": t.src, "value": suffix, "args": args, "op": t.op, "peer": t.dst}
    return {
        "type": "recv",
        "frag": t.dst,
        "value": suffix,
        "targets": [m.value for m in group],
        "op": t.op,
        "peer": t.src,
        # a replay buffer lives with the learner: what actors collected goes straight in
        "store": [m.value for m in group if m.value in replays],
    }
