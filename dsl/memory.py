"""Recurrent networks in the loop: which carried state belongs to which component.

A policy or value over a recurrent network (``networks.<n>.recurrent``) takes its state as a
loop value, ``act(obs, h, first)`` / ``value(obs, h, first)``, and the rollout buffer stores
``first`` and the states those calls read, ``insert(..., first, h[, hv])``. The stored states
are matched to their networks by the calls that read them, never by position, so ``h`` and
``hv`` may come in either order. The code generator and the checks both read this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.spec import LoopCall, Spec


@dataclass(frozen=True)
class StoredMemory:
    """What a rollout insert stores for recurrent networks: ``first`` and the state read by the
    policy and by the value (None for a side whose network is not recurrent)."""

    first: str
    policy: str | None
    value: str | None


def state_size(spec: Spec, component: str) -> int:
    """The carried state's size of a policy or value over a recurrent network (0 otherwise)."""
    net = spec.networks.get(spec.components[component].get("network"))
    return int(net.recurrent["size"]) if net is not None and net.recurrent else 0


def hidden_readers(flow: Dataflow) -> dict[str, LoopCall]:
    """Each state value a recurrent ``act``/``value`` call reads -> that call."""
    out: dict[str, LoopCall] = {}
    for info in flow.calls:
        method = info.method
        if info.kind in ("policy", "value") and len(method.inputs) == 3 and len(info.call.call.args) == 3:
            out.setdefault(info.call.call.args[1].text, info.call)
    return out


def stored_memory(spec: Spec, flow: Dataflow, args: tuple[str, ...]) -> StoredMemory | None:
    """The memory stored by a rollout insert with arguments ``args`` (None without one)."""
    types = [flow.values[a].type if a in flow.values else None for a in args]
    if "first" not in types:
        return None
    first = args[types.index("first")]
    readers = hidden_readers(flow)
    sides: dict[str, str] = {}
    for arg, vtype in zip(args, types, strict=True):
        if vtype == "hidden" and arg in readers:
            sides.setdefault(spec.components[readers[arg].call.component].kind, arg)
    return StoredMemory(first, sides.get("policy"), sides.get("value"))
