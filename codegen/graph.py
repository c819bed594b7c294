"""The loop of a validated spec as a dataflow graph with dtypes and shapes.

Nodes are the loop's calls in execution order; edges are the named values (and
each buffer's contents). Shapes come from the env's spaces and the components,
with ``batch`` envs per env-stepping worker.
"""

from __future__ import annotations

import dataclasses

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.ir import BlockInfo, Edge, Graph, Node, Tensor
from rlgen.dsl.catalog import BUFFER_KINDS, COMPUTE_KINDS, EnvSpaces, GroupSpaces
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.diagnostics import json_path
from rlgen.dsl.groups import assign_groups
from rlgen.dsl.memory import state_size, stored_memory
from rlgen.dsl.spec import Spec

#: Fields of an on-policy rollout as the learner receives them (rlgen.runtime.buffers.Rollout);
#: a rollout that stores the global state has ``states`` after them.
ROLLOUT_FIELDS = ("obs", "actions", "rewards", "terminated", "truncated", "valid", "logp", "values")
#: What a rollout of recurrent networks stores after them (rlgen.runtime.buffers.Memory).
MEMORY_FIELDS = ("first", "policy_states", "value_states")
#: Length of the metrics vector each learner kind returns (None: not known before run).
METRIC_COUNTS = {kind: len(algo.metrics) for kind, algo in ALGORITHMS.items()}


class GraphError(ValueError):
    """The spec cannot be turned into a graph (e.g. the env's spaces are unknown)."""


def placement(spec: Spec, component: str) -> str:
    """``env``, ``compute`` (TensorFlow) or ``cpu`` (host-side) for a component."""
    if component == "env":
        return "env"
    comp = spec.components[component]
    if comp.kind in COMPUTE_KINDS or (comp.kind == "custom" and comp.get("placement") == "compute"):
        return "compute"
    return "cpu"


class _Shapes:
    """Tensors of each value type for one spec and batch."""

    def __init__(self, spaces: EnvSpaces, batch: int, group: GroupSpaces | None = None) -> None:
        self.obs = tuple((group or spaces).observation.shape)
        self.obs_dtype = (group or spaces).observation.dtype  # uint8 images stay uint8 up to the networks
        self.state = tuple(spaces.state or ())
        act = (group or spaces).action
        self.discrete = act.kind == "discrete"
        self.act_shape = () if self.discrete else tuple(act.shape)
        self.act_dtype = "int32" if self.discrete else "float32"
        self.batch = batch
        self.rows = group.rows if group else None  # a group's tensors: batch (env copies) x its rows

    def _t(self, name: str, dtype: str, shape: tuple[int, ...], axis: int) -> Tensor:
        if self.rows is None:
            return Tensor(name, dtype, shape, axis)
        full = list(shape)
        full[axis] = self.batch * self.rows
        return Tensor(name, dtype, tuple(full), axis, self.rows)

    def per_env(self, vtype: str) -> tuple[str, tuple[int, ...]]:
        return {
            "obs": (self.obs_dtype, self.obs),
            "state": ("float32", self.state),
            "action": (self.act_dtype, self.act_shape),
            "reward": ("float32", ()),
            "flag": ("bool", ()),
            "logp": ("float32", ()),
            "value": ("float32", ()),
            "first": ("bool", ()),
        }[vtype]

    def value(self, name: str, vtype: str, metrics: int | None) -> tuple[Tensor, ...]:
        if vtype == "metrics":
            return (Tensor(name, "float32", (metrics,)),)
        dtype, shape = self.per_env(vtype)
        return (self._t(name, dtype, (self.batch, *shape), 0),)

    def rollout(self, length: int, state: bool = False, memory: tuple[int, int] | None = None) -> tuple[Tensor, ...]:
        """A rollout's fields, then its ``states``; with ``memory=(policy_size, value_size)``
        (recurrent networks) then ``first`` and the states each network read."""
        special = {
            "obs": (self.obs_dtype, self.obs),
            "actions": (self.act_dtype, self.act_shape),
            "states": ("float32", self.state),
            "policy_states": ("float32", (memory or (0, 0))[0:1]),
            "value_states": ("float32", (memory or (0, 0))[1:2]),
        }
        fields = ROLLOUT_FIELDS + (("states",) if state else ()) + (MEMORY_FIELDS if memory else ())
        out = []
        for f in fields:
            dtype, shape = special.get(f, ("float32", ()))
            out.append(self._t(f, dtype, (length, self.batch, *shape), 1))
        return tuple(out)

    def staged(self, fields: tuple[tuple[str, str], ...], length: int) -> tuple[Tensor, ...]:
        """What a block inserted into a buffer: ``[length, batch, ...]`` per inserted field."""
        out = []
        for fname, ftype in fields:
            dtype, shape = self.per_env(ftype)
            out.append(self._t(fname, dtype, (length, self.batch, *shape), 1))
        return tuple(out)

    def sampled(self, fields: tuple[tuple[str, str], ...], size: int) -> tuple[Tensor, ...]:
        """A minibatch of ``size`` stored transitions (rlgen.runtime.replay.Transitions):
        every inserted field but ``truncated`` (it only marks reset steps, which are not
        stored); flags become float32 0/1."""
        out = []
        for fname, ftype in fields:
            if fname == "truncated":
                continue
            dtype, shape = self.per_env(ftype)
            out.append(Tensor(fname, "float32" if ftype == "flag" else dtype, (size, *shape)))
        return tuple(out)


def build_graph(spec: Spec, flow: Dataflow, spaces: EnvSpaces | None, batch: int | None = None) -> Graph:
    """The dataflow graph of ``spec``'s loop; ``batch`` defaults to all envs in one worker."""
    if spaces is None:
        raise GraphError(
            "the env's observation and action spaces are unknown, so shapes cannot be fixed; "
            "declare them under `env: spaces:` (e.g. {observation: {shape: [4]}, action: {n: 2}})"
        )
    shapes = _Shapes(spaces, (batch or spec.env.num_envs) * spaces.rows)
    groups = assign_groups(spec, flow) if spaces.groups else None
    if groups is not None:  # each group's values: env copies x its rows, its spaces
        per_group = {g.name: _Shapes(spaces, batch or spec.env.num_envs, g) for g in spaces.groups}
    blocks = tuple(
        BlockInfo(b.name, b.repeat, b.every, b.after, json_path(b.path), b.carry, b.every_steps)
        for b in spec.loop.all_blocks()
    )
    nodes: list[Node] = []
    node_of: dict[int, str] = {}
    for info in flow.calls:
        lc, call = info.call, info.call.call
        index = info.block.calls.index(lc)
        nid = f"{info.block.name}.{index}"
        node_of[id(lc)] = nid
        nodes.append(
            Node(
                id=nid,
                target=call.target,
                component=call.component,
                method=call.method,
                kind=info.kind,
                placement=placement(spec, call.component),
                block=info.block.name,
                inputs=tuple(a.text for a in call.args),
                outputs=tuple(o.text for o in call.outputs),
                path=json_path(lc.path),
                text=str(call),
            )
        )
    carried = {src: dst for b in spec.loop.all_blocks() for dst, src in b.carry}
    if groups is None:
        edges = [_value_edge(spec, flow, shapes, name, nodes, carried) for name in flow.values]
        edges += [_buffer_edge(spec, flow, shapes, name, nodes, blocks) for name in _buffers(spec, nodes)]
    else:
        edges = []
        for name in flow.values:
            g = groups.values.get(name)
            edge = _value_edge(spec, flow, per_group.get(g, shapes), name, nodes, carried)
            edges.append(dataclasses.replace(edge, group=g))
        for name in _buffers(spec, nodes):
            g = groups.components.get(name)
            edge = _buffer_edge(spec, flow, per_group.get(g, shapes), name, nodes, blocks)
            edges.append(dataclasses.replace(edge, group=g))
    return Graph(spec.name, shapes.batch, blocks, tuple(nodes), tuple(edges))


def _value_edge(spec, flow, shapes, name, nodes, carried) -> Edge:
    value = flow.values[name]
    producer = next(n.id for n in nodes if name in n.outputs)
    consumers = tuple(n.id for n in nodes if name in n.inputs)
    comp = spec.components.get(value.producer.call.component)
    if value.type == "hidden":  # a recurrent network's state: its GRU's size
        parts = (shapes._t(name, "float32", (shapes.batch, state_size(spec, value.producer.call.component)), 0),)
    elif value.type == "batch":
        fields = tuple((p.name, p.type) for p in comp.methods["insert"].inputs)
        parts = shapes.sampled(fields, int(comp.get("batch_size")))
    else:
        metrics = METRIC_COUNTS.get(comp.kind) if comp else None
        parts = shapes.value(name, value.type, metrics)
    return Edge(name, value.type, producer, consumers, parts, carried.get(name))


def _buffers(spec: Spec, nodes: list[Node]) -> list[str]:
    used = dict.fromkeys(n.component for n in nodes)
    return [c for c in used if c in spec.components and spec.components[c].kind in BUFFER_KINDS]


def _buffer_edge(spec, flow, shapes, name, nodes, blocks) -> Edge:
    """A buffer's contents: produced by its (last) insert, used by calls that read it."""
    comp = spec.components[name]
    inserts = [n for n in nodes if n.component == name and n.method == "insert"]
    producer = inserts[-1] if inserts else None
    consumers = tuple(n.id for n in nodes if name in n.inputs or (n.component == name and n.method != "insert"))
    block = next(b for b in blocks if producer and b.name == producer.block) if producer else None
    if comp.kind == "rollout":
        length = comp.get("length") or (block.repeat if block else 1)
        args = producer.inputs if producer else ()
        state = any(a in flow.values and flow.values[a].type == "state" for a in args)
        memory = stored_memory(spec, flow, args)
        sizes = None
        if memory is not None:
            sizes = tuple(
                state_size(spec, flow.values[h].producer.call.component) if h else 0
                for h in (memory.policy, memory.value)
            )
        parts = shapes.rollout(length, state=state, memory=sizes)
    else:
        method = comp.methods["insert"]
        fields = tuple((p.name, p.type) for p in method.inputs)
        parts = shapes.staged(fields, block.repeat if block else 1)
    return Edge(name, "buffer", producer.id if producer else "", consumers, parts)
