"""Lowering of components and networks: what each kind's constructor gets, decided once.

One function per component kind (:data:`LOWER`) turns a spec component into its
:class:`~rlgen.codegen.plan.ComponentPlan` ``options``; the matching template part
(a learner's ``fragment.j2`` in its home, :mod:`rlgen.algorithms`) renders it. A
learner's lowering is its home's: its settings become its config's keyword arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.context import Context
from rlgen.codegen.ir import FDG, Fragment
from rlgen.codegen.plan import ActionPlan, ComponentPlan, NetworkPlan
from rlgen.codegen.weights import component_weights, network_heads, state_networks
from rlgen.dsl.catalog import COMPONENT_REFS, GroupSpaces
from rlgen.dsl.dataflow import analyze
from rlgen.dsl.groups import assign_groups

#: the learners whose compiled update takes observations in the env's dtype (``obs_dtype``);
#: SAC's and TD3's critics concatenate observations with actions and take float32 only
OBS_DTYPE_LEARNERS = frozenset({"ppo", "a2c", "mappo", "ippo", "dqn"})


def component_groups(ctx: Context) -> dict[str, GroupSpaces]:
    """With several agent groups: each component's and network's group (by name); else empty."""
    if not ctx.spaces.groups:
        return {}
    assigned = assign_groups(ctx.spec, analyze(ctx.spec))
    out = {name: ctx.spaces.group(g) for name, g in assigned.components.items()}
    out.update({net: ctx.spaces.group(gs[0]) for net, gs in assigned.networks.items()})
    return {k: v for k, v in out.items() if v is not None}


def action_plan(ctx: Context, group: GroupSpaces | None = None) -> ActionPlan:
    act = (group or ctx.spaces).action
    if act.kind == "discrete":
        return ActionPlan(n=act.n)
    size = math.prod(act.shape)
    low = None if act.low is None else tuple([float(act.low)] * size)
    high = None if act.high is None else tuple([float(act.high)] * size)
    return ActionPlan(shape=tuple(act.shape), low=low, high=high)


def components_of(fdg: FDG, ctx: Context, frag: Fragment) -> list[str]:
    """Components the fragment's calls use, plus those they refer to (a learner's policy/value), in spec order."""
    names = list(dict.fromkeys(fdg.graph.node(n).component for n in frag.nodes))
    out: list[str] = []
    while names:
        name = names.pop(0)
        if name in out or name == "env":
            continue
        comp = ctx.spec.components[name]
        refs = [comp.get(k) for k in COMPONENT_REFS.get(comp.kind, ()) if comp.get(k) in ctx.spec.components]
        names = refs + names
        out.append(name)
    order = list(ctx.spec.components)
    return sorted(out, key=order.index)


# --- per kind --------------------------------------------------------------------------
class KindContext:
    """What a kind's lowering reads: the FDG, the spec context, the fragment and its facts."""

    def __init__(self, fdg: FDG, ctx: Context, frag: Fragment) -> None:
        self.fdg, self.ctx, self.frag = fdg, ctx, frag
        self.plain = ctx.resolved["components"]
        self.plain_networks = ctx.resolved["networks"]
        self.buffer_len = {e.name: e.parts[0].shape[0] for e in fdg.graph.edges if e.type == "buffer"}
        self.learners = ctx.policy.learner_workers(fdg.workers) if fdg.cut == "gradients" else 1
        self.reduce = any(t.op == "allreduce" and t.src == frag.name for t in fdg.transfers)


def _policy(k: KindContext, name: str) -> dict[str, Any]:
    comp = k.ctx.spec.components[name]
    options = {"distribution": comp.get("distribution"), "log_std_init": float(comp.get("log_std_init"))}
    if comp.get("distribution") == "deterministic":
        options["noise_std"] = float(comp.get("noise_std", 0.1))
    gsde = comp.get("gsde")
    if gsde is not None:  # the collect phase whose start draws new noise: the acting block's steps
        graph = k.fdg.graph
        acting = [graph.block(n.block).repeat for n in graph.nodes if (n.component, n.method) == (name, "act")]
        options["gsde"] = {
            "sample_freq": int(gsde["sample_freq"]),
            "log_std_init": float(gsde["log_std_init"]),
            "period": acting[0] if acting else 1,
        }
    return options


def _qvalue(k: KindContext, name: str) -> dict[str, Any]:
    return {"exploration": k.plain[name]["exploration"]}


def _rollout(k: KindContext, name: str) -> dict[str, Any]:
    parts = {t.name: t for t in k.fdg.graph.edge(name).parts}
    options: dict[str, Any] = {"length": k.buffer_len[name], **({"state": True} if "states" in parts else {})}
    if "first" in parts:  # recurrent networks: the states each read, (policy's size, value's size)
        options["memory"] = [parts[f].shape[-1] for f in ("policy_states", "value_states")]
    return options


def _replay(k: KindContext, name: str) -> dict[str, Any]:
    graph = k.fdg.graph
    comp = k.ctx.spec.components[name]
    samples = any(graph.node(n).component == name and graph.node(n).method == "sample" for n in k.frag.nodes)
    return {
        "capacity": int(comp.get("capacity")),
        "batch_size": int(comp.get("batch_size")),
        "compress": bool(comp.get("compress")),
        "stage": None if samples else k.buffer_len[name],  # an actor's side: stage, send to the learner
    }


LOWER: dict[str, Callable[[KindContext, str], dict[str, Any]]] = {
    "policy": _policy,
    "value": lambda k, name: {},
    "qvalue": _qvalue,
    "rollout": _rollout,
    "replay": _replay,
    **{kind: algo.lower for kind, algo in ALGORITHMS.items()},  # each home lowers its learner
}


def _seeded(kind: str, options: dict[str, Any]) -> bool:
    """Does a component of this kind draw random numbers (sampling, minibatch shuffles)?"""
    if kind == "replay":
        return options["stage"] is None  # the buffer that samples, not an actor's stage
    return kind in ("policy", "qvalue") or (kind in ALGORITHMS and ALGORITHMS[kind].seeded)


def lower_components(
    fdg: FDG, ctx: Context, frag: Fragment
) -> tuple[tuple[ComponentPlan, ...], tuple[NetworkPlan, ...]]:
    """The fragment's components (in spec order) and the networks they read."""
    k = KindContext(fdg, ctx, frag)
    spec = ctx.spec
    names = components_of(fdg, ctx, frag)
    nets: list[str] = []
    heads: dict[str, tuple[int, int] | int] = {}
    networks = []
    for name in names:
        net = (
            spec.components[name].get("network")
            if spec.components[name].kind in ("policy", "value", "qvalue")
            else None
        )
        if net is not None and net not in nets:
            nets.append(net)
    plain_nets = k.plain_networks
    agents = per_agent(ctx)
    group_of = component_groups(ctx)
    for n in sorted(nets):
        net_heads = network_heads(ctx, n)
        sizes, gains = [h[1] for h in net_heads], [h[2] for h in net_heads]
        networks.append(
            NetworkPlan(
                attr=n,
                config=plain_nets[n],
                output_size=tuple(sizes) if len(net_heads) > 1 else sizes[0],
                gain=tuple(gains) if len(net_heads) > 1 else gains[0],
                seed=1 + sorted(spec.networks).index(n),
                input="state" if n in state_networks(ctx) else None,
                agents=agents,
                group=group_of[n].suffix if n in group_of else None,
            )
        )
        if len(net_heads) > 1:  # a shared torso: each component reads its own head
            start = 0
            for comp_name, size, _ in net_heads:
                kind = spec.components[comp_name].kind
                heads[comp_name] = (start, start + size) if kind == "policy" else start
                start += size
    # a component's sampling seed is its index among the loop's compute components, so that a
    # group's fragment under agent-groups seeds its components as `single`'s one fragment does
    seeded_as = names
    if ctx.policy.per_group:
        every = {c for f in fdg.fragments if f.kind == "compute" for c in components_of(fdg, ctx, f)}
        seeded_as = [c for c in spec.components if c in every]
    components = []
    for name in names:
        i = seeded_as.index(name)
        comp = spec.components[name]
        network = comp.get("network") if comp.kind in ("policy", "value", "qvalue") else None
        options = LOWER[comp.kind](k, name)
        if agents is not None and comp.kind in ALGORITHMS:  # minibatches of whole env copies
            options = {**options, "agent_block": agents}
        if comp.kind in OBS_DTYPE_LEARNERS and ctx.spaces.observation.dtype != "float32":
            options = {**options, "obs_dtype": ctx.spaces.observation.dtype}  # uint8 images reach the update
        components.append(
            ComponentPlan(
                attr=name,
                kind=comp.kind,
                seed=100 + i,
                network=network,
                head=heads.get(name) if name in heads else None,
                options=options,
                seeded=_seeded(comp.kind, options),
                group=group_of[name].suffix if name in group_of else None,
                action_dtype=(
                    ("int32" if group_of[name].action.kind == "discrete" else "float32") if name in group_of else None
                ),
            )
        )
    return tuple(components), tuple(networks)


def per_agent(ctx: Context) -> int | None:
    """The number of agents when each has its own network (``env.agents: {share: false}``),
    else None: every network is then an ensemble with one member per agent."""
    env = ctx.spec.env
    return ctx.spaces.rows if env.multi_agent and not env.share else None


def gaussian(ctx: Context, component: str) -> bool:
    """Does this policy hold a ``log_std`` variable (a Gaussian over box actions)?"""
    return len(component_weights(ctx, component)) > 1
