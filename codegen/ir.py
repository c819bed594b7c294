"""The intermediate representation between the spec and the templates.

Everything here is a small frozen dataclass of plain data, so a graph, an FDG
and a plan can be written to JSON and read back exactly
(``from_json(to_json(x), type(x)) == x``). Keys are sorted and lists keep their
order, so the same input always gives the same bytes.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any

Shape = tuple[int | None, ...]


# --- the dataflow graph -------------------------------------------------------------
@dataclass(frozen=True)
class Tensor:
    """One array crossing an edge: dtype, shape, and which axis is the env batch (if any)."""

    name: str
    dtype: str
    shape: Shape
    batch_axis: int | None = None
    #: An agent group's rows per env copy (``env.groups``): the batch axis holds ``batch * rows``
    #: rows, the fragment's batch counting env copies. None: the batch axis is the fragment's batch.
    rows: int | None = field(default=None, metadata={"omit_none": True})

    def with_batch(self, batch: int) -> Tensor:
        """The same tensor for a fragment that holds ``batch`` envs (env copies for a group's)."""
        if self.batch_axis is None:
            return self
        shape = list(self.shape)
        shape[self.batch_axis] = batch * (self.rows or 1)
        return dataclasses.replace(self, shape=tuple(shape))


@dataclass(frozen=True)
class Node:
    """One call of the loop (``rollout.2`` = the third call of block ``rollout``).

    ``placement`` is ``env`` (environment stepping), ``compute`` (TensorFlow) or
    ``cpu`` (host-side bookkeeping such as buffers).
    """

    id: str
    target: str
    component: str
    method: str
    kind: str
    placement: str
    block: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    path: str
    text: str


@dataclass(frozen=True)
class Edge:
    """A named value: who produces it, who uses it, what it holds.

    A buffer component is an edge too (its contents, produced by its inserts).
    ``carried_to`` names the value it becomes at the end of a repetition (``carry``).
    """

    name: str
    type: str
    producer: str
    consumers: tuple[str, ...]
    parts: tuple[Tensor, ...]
    carried_to: str | None = None
    #: The agent group it belongs to (``env.groups``), if the env has several.
    group: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class BlockInfo:
    """A loop block's schedule: ``repeat`` times in a row, every ``every``-th iteration, ``after``
    steps, in the iterations that pass a multiple of ``every_steps`` env steps (0: all)."""

    name: str
    repeat: int
    every: int
    after: int
    path: str
    carry: tuple[tuple[str, str], ...] = ()
    every_steps: int = 0


@dataclass(frozen=True)
class Graph:
    """The loop as a dataflow graph; shapes use ``batch`` envs (envs per env-stepping worker)."""

    spec: str
    batch: int
    blocks: tuple[BlockInfo, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def edge(self, name: str) -> Edge:
        return next(e for e in self.edges if e.name == name)

    def block(self, name: str) -> BlockInfo:
        return next(b for b in self.blocks if b.name == name)


# --- fragments, transfers, placement ------------------------------------------------
@dataclass(frozen=True)
class Port:
    """A value entering or leaving a fragment, with its shapes at that fragment."""

    value: str
    parts: tuple[Tensor, ...]


@dataclass(frozen=True)
class Step:
    """A unit of a fragment's code: one call, or several fused compute calls (``nodes``)."""

    name: str
    kind: str  # compute | env | cpu | loop (a whole iteration, see passes.fuse_loop)
    block: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Fragment:
    """A piece of the loop that runs on every rank of one role, ``replicas`` times in all."""

    name: str
    kind: str  # compute | env
    role: str
    side: str
    batch: int
    nodes: tuple[str, ...]
    steps: tuple[Step, ...] = ()
    inputs: tuple[Port, ...] = ()
    outputs: tuple[Port, ...] = ()
    replicas: int = 1


@dataclass(frozen=True)
class Transfer:
    """A value crossing from one fragment to another.

    ``op`` is ``local`` (same process: a plain call), a Horovod collective
    (``allgather``, ``alltoall``, ``broadcast``, ``allreduce``) on ``process_set``, or
    a one-way channel operation: ``send`` (a queue: taken in order, the sender does not
    wait) or ``publish`` (a versioned latest value, which the receiver may take up to
    ``lag`` versions old without waiting). ``mode`` ``async`` (asynchronous policies):
    a ``send`` is taken from whichever sender is first, dropping experience more than
    ``lag`` versions old, and a ``publish`` is taken without ever waiting. ``at`` says when: after a node
    (``rollout.2``), at the end of a block (``after:rollout``), at the end of every
    iteration whichever blocks ran (``end``), before the first iteration (``start``) or
    inside a node (``in:learn.0``, e.g. a gradient allreduce).
    ``payload`` is what one sending rank contributes; ``received`` what arrives.
    """

    value: str
    src: str
    dst: str
    op: str
    at: str
    process_set: str = "all"
    partition: str | None = None
    payload: tuple[Tensor, ...] = ()
    received: tuple[Tensor, ...] = ()
    lag: int = 0
    mode: str = "sync"


@dataclass(frozen=True)
class RankInfo:
    rank: int
    role: str
    host: str
    fragments: tuple[str, ...]


@dataclass(frozen=True)
class ProcessSet:
    name: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class FDG:
    """The fragmented dataflow graph: the graph cut by one policy, with transfers and placement."""

    graph: Graph
    policy: str
    workers: int
    partition: str | None = None
    cut: str | None = None
    sides: tuple[tuple[str, str], ...] = ()  # node id -> side
    fragments: tuple[Fragment, ...] = ()
    transfers: tuple[Transfer, ...] = ()
    ranks: tuple[RankInfo, ...] = ()
    process_sets: tuple[ProcessSet, ...] = ()

    def fragment(self, name: str) -> Fragment:
        return next(f for f in self.fragments if f.name == name)

    def fragment_of(self, node_id: str) -> Fragment:
        return next(f for f in self.fragments if node_id in f.nodes)

    def roles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.role for r in self.ranks))


# --- JSON ---------------------------------------------------------------------------
def to_data(obj: Any) -> Any:
    """Plain JSON data of an IR object (dataclasses become objects, tuples lists)."""
    if dataclasses.is_dataclass(obj):
        return {
            f.name: to_data(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)
        }
    if isinstance(obj, tuple | list):
        return [to_data(v) for v in obj]
    return obj


def to_json(obj: Any, sort_keys: bool = True) -> str:
    """Deterministic JSON text (two-space indent, final newline). Keys are sorted unless
    ``sort_keys`` is False: then objects keep their fields' (and dicts' insertion) order,
    which matters where the order of a dict is part of what is rendered."""
    return json.dumps(to_data(obj), sort_keys=sort_keys, indent=2, ensure_ascii=True) + "\n"


def _from_data(data: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        arms = [a for a in typing.get_args(hint) if a is not type(None)]
        return _from_data(data, next((a for a in arms if _fits(data, a)), arms[0]))
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_data(v, args[0]) for v in data)
        return tuple(_from_data(v, a) for v, a in zip(data, args, strict=True))
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(
            **{
                f.name: _from_data(data[f.name], hints[f.name])
                for f in dataclasses.fields(hint)
                if f.name in data or not f.metadata.get("omit_none")
            }
        )
    return data


def _fits(data: Any, hint: Any) -> bool:
    """Could JSON ``data`` be a value of type ``hint``? (Picks the arm of a union.)"""
    origin = typing.get_origin(hint) or hint
    if isinstance(data, list):
        return origin in (tuple, list)
    if isinstance(data, dict):
        return dataclasses.is_dataclass(hint) or origin is dict
    return not (origin in (tuple, list, dict) or dataclasses.is_dataclass(hint))


def from_json(text: str, cls: type) -> Any:
    """Read back what :func:`to_json` wrote, as an instance of ``cls``."""
    return _from_data(json.loads(text), cls)
