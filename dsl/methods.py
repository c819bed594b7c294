"""Method signatures of component kinds: typed inputs and outputs (imports nothing)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    optional: bool = False


@dataclass(frozen=True)
class Method:
    """A callable method of a component kind: typed inputs and outputs."""

    name: str
    inputs: tuple[Param, ...] = ()
    outputs: tuple[Param, ...] = ()

    @property
    def min_inputs(self) -> int:
        return sum(not p.optional for p in self.inputs)

    @property
    def min_outputs(self) -> int:
        return sum(not p.optional for p in self.outputs)

    def signature(self, component: str) -> str:
        def fmt(params: tuple[Param, ...]) -> str:
            req = [p.name for p in params if not p.optional]
            opt = [p.name for p in params if p.optional]
            return ", ".join(req) + "".join(f"[, {o}" for o in opt) + "]" * len(opt)

        outs = f" -> {fmt(self.outputs)}" if self.outputs else ""
        return f"{component}.{self.name}({fmt(self.inputs)}){outs}"


def method(name: str, inputs: str = "", outputs: str = "") -> Method:
    """``method("act", "obs:obs", "action:action logp:logp?")``: name:type, ``?`` = optional."""

    def params(spec: str) -> tuple[Param, ...]:
        out = []
        for item in spec.split():
            pname, ptype = item.split(":")
            out.append(Param(pname, ptype.rstrip("?"), ptype.endswith("?")))
        return tuple(out)

    return Method(name, params(inputs), params(outputs))
