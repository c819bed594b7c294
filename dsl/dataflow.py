"""Dataflow of the loop: which call produces and uses which value, with types.

:func:`analyze` walks the loop in execution order (``init`` first, then the
blocks) and records every value, every use and every call. It also reports the
errors that only this walk can see: unknown components or methods, wrong
arity, undefined values, values used before they are produced, values produced
twice, type mismatches and bad carries. The code generator builds its graph
from the same :class:`Dataflow`.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

from rlgen.dsl.catalog import BUFFER_KINDS, RESERVED_NAMES, env_methods, group_env_methods
from rlgen.dsl.diagnostics import article, did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.methods import Method
from rlgen.dsl.spec import Block, LoopCall, Spec


@dataclass(frozen=True)
class Value:
    """A named value of the loop: its type and the call (and output index) producing it."""

    name: str
    type: str
    block: str
    producer: LoopCall
    index: int


@dataclass(frozen=True)
class CallInfo:
    """A call resolved against its component: ``component`` is ``None`` for ``env``."""

    block: Block
    call: LoopCall
    kind: str
    method: Method


@dataclass
class Dataflow:
    values: dict[str, Value] = field(default_factory=dict)
    uses: dict[str, list[LoopCall]] = field(default_factory=dict)
    calls: list[CallInfo] = field(default_factory=list)
    component_args: dict[str, list[LoopCall]] = field(default_factory=dict)
    inserted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def calls_to(self, target: str) -> list[CallInfo]:
        return [c for c in self.calls if c.call.call.target == target]


def _resolve(spec: Spec, lc: LoopCall, flow: Dataflow) -> tuple[str, Method] | None:
    call = lc.call
    if call.component == "env":
        kind, methods = "env", env_methods(bool(spec.env.state), spec.recurrent)
        if spec.env.grouped:  # one value of each kind per group
            methods = group_env_methods(tuple(g for g, _ in spec.env.groups), bool(spec.env.state))
    elif call.component in spec.components:
        comp = spec.components[call.component]
        kind, methods = comp.kind, comp.methods
    else:
        names = ["env", *spec.components]
        flow.findings.append(
            error(
                "E303",
                lc.path,
                f"'{call.component}' is not a component{did_you_mean(call.component, names)}",
                f"components are {quote_list(names)}; define it under `components:`",
                offset=0,
                length=len(call.component),
            )
        )
        return None
    if call.method not in methods:
        offset = call.text.index(call.method, call.text.index("."))
        flow.findings.append(
            error(
                "E304",
                lc.path,
                f"{kind} component '{call.component}' has no method '{call.method}'"
                f"{did_you_mean(call.method, methods)}",
                "its methods are " + "; ".join(m.signature(call.component) for m in methods.values()),
                offset=offset,
                length=len(call.method),
            )
        )
        return None
    return kind, methods[call.method]


def _group_arity(spec: Spec) -> str | None:
    """Why env calls take one value per group (E433), or None without groups."""
    if not spec.env.grouped:
        return None
    names = ", ".join(g for g, _ in spec.env.groups)
    state = " and the state" if spec.env.state else ""
    return f"with {len(spec.env.groups)} agent groups ({names}) the env takes and returns each value{state} per group"


def _check_arity(lc: LoopCall, method: Method, flow: Dataflow, groups: str | None = None) -> bool:
    call = lc.call
    sig = method.signature(call.component)
    ok = True
    if groups is not None and (
        len(call.args) != len(method.inputs) or (call.outputs and len(call.outputs) != len(method.outputs))
    ):
        n_in, n_out = len(call.args), len(call.outputs)
        what = (
            f"takes {len(method.inputs)} argument(s), got {n_in}"
            if n_in != len(method.inputs)
            else f"returns {len(method.outputs)} value(s), but {n_out} are named"
        )
        flow.findings.append(error("E433", lc.path, f"{call.target} {what}: {groups}", f"write {sig}", offset=0))
        return False
    if not method.min_inputs <= len(call.args) <= len(method.inputs):
        flow.findings.append(
            error(
                "E305",
                lc.path,
                f"{call.target} takes {_count(method.min_inputs, len(method.inputs))} "
                f"argument(s), got {len(call.args)}",
                f"its signature is {sig}",
                offset=0,
            )
        )
        ok = False
    if call.outputs and not method.min_outputs <= len(call.outputs) <= len(method.outputs):
        flow.findings.append(
            error(
                "E305",
                lc.path,
                f"{call.target} returns {_count(method.min_outputs, len(method.outputs))} "
                f"value(s), but {len(call.outputs)} are named",
                f"its signature is {sig}",
                offset=call.outputs[0].offset,
            )
        )
        ok = False
    if not call.outputs and method.min_outputs:
        flow.findings.append(
            error(
                "E305",
                lc.path,
                f"the results of {call.target} are not named",
                f"name them: {sig}",
                offset=len(call.text.rstrip()) - 1,
            )
        )
        ok = False
    return ok


def _count(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo} to {hi}"


def analyze(spec: Spec) -> Dataflow:
    """Walk the loop once; return its dataflow and the errors found on the way."""
    flow = Dataflow()
    produced_at: dict[str, tuple[int, LoopCall]] = {}
    order = [(b, lc) for b in spec.loop.all_blocks() for lc in b.calls]
    for pos, (_, lc) in enumerate(order):
        for out in lc.call.outputs:
            produced_at.setdefault(out.text, (pos, lc))
    visible: set[str] = set()
    carried: set[str] = set()
    for block in spec.loop.all_blocks():
        carried |= {target for target, _ in block.carry}
    pos = -1
    for block in spec.loop.all_blocks():
        for lc in block.calls:
            pos += 1
            resolved = _resolve(spec, lc, flow)
            if resolved is None:
                continue
            kind, method = resolved
            flow.calls.append(CallInfo(block, lc, kind, method))
            arity_ok = _check_arity(lc, method, flow, _group_arity(spec) if kind == "env" else None)
            for i, arg in enumerate(lc.call.args):
                ptype = method.inputs[i].type if i < len(method.inputs) else None
                _use(spec, flow, lc, arg, ptype, visible, carried, produced_at, pos)
            if kind in BUFFER_KINDS and method.name == "insert" and arity_ok:
                flow.inserted[lc.call.component] = tuple(p.name for p in method.inputs[: len(lc.call.args)])
            for i, out in enumerate(lc.call.outputs):
                _produce(spec, flow, lc, block, out, method.outputs[i].type if i < len(method.outputs) else "?", i)
                visible.add(out.text)
        _check_carry(block, flow, visible)
    return flow


def _use(spec, flow, lc, arg, ptype, visible, carried, produced_at, pos) -> None:
    name = arg.text
    if name in spec.components or name == "env":
        kind = "env" if name == "env" else spec.components[name].kind
        if ptype == "buffer" and kind in BUFFER_KINDS | {"custom"}:
            flow.component_args.setdefault(name, []).append(lc)
            return
        flow.findings.append(
            error(
                "E309",
                lc.path,
                f"'{name}' is {article(kind)} component, not a value"
                + (f"; {lc.call.target} expects {article(ptype)} here" if ptype else ""),
                "pass the value produced by one of its calls",
                offset=arg.offset,
                length=len(name),
            )
        )
        return
    if name not in visible:
        if name in produced_at and (name in carried or produced_at[name][0] > pos):
            flow.findings.append(
                error(
                    "E307",
                    lc.path,
                    f"'{name}' is used before it is produced (by {produced_at[name][1].call.target} later in the loop)",
                    f"produce '{name}' in `init` (e.g. env.reset() -> {name}) or feed it back with "
                    f"`carry: {{{name}: ...}}`",
                    offset=arg.offset,
                    length=len(name),
                )
            )
        elif name not in produced_at:
            candidates = set(produced_at) | set(spec.components)
            flow.findings.append(
                error(
                    "E306",
                    lc.path,
                    f"'{name}' is not a value of the loop{did_you_mean(name, candidates)}",
                    "values are named by the outputs of calls (`-> name`)",
                    offset=arg.offset,
                    length=len(name),
                )
            )
        return
    flow.uses.setdefault(name, []).append(lc)
    value = flow.values.get(name)
    accepted = ptype.split("|") if ptype else []
    if value and ptype and value.type not in accepted:
        flow.findings.append(
            error(
                "E309",
                lc.path,
                f"'{name}' is {article(value.type)} (from {value.producer.call.target}), "
                f"but {lc.call.target} expects {' or '.join(article(t) for t in accepted)} here",
                "check the order of the arguments against the method's signature",
                offset=arg.offset,
                length=len(name),
            )
        )


def _produce(spec, flow, lc, block, out, vtype, index) -> None:
    name = out.text
    if name in RESERVED_NAMES or name in spec.components or keyword.iskeyword(name):
        what = (
            "a Python keyword"
            if keyword.iskeyword(name)
            else "a reserved word"
            if name in RESERVED_NAMES
            else "the name of a component"
        )
        flow.findings.append(
            error(
                "E311",
                lc.path,
                f"output '{name}' is {what}",
                "choose another name for this value",
                offset=out.offset,
                length=len(name),
            )
        )
        return
    if name in flow.values:
        first = flow.values[name].producer
        flow.findings.append(
            error(
                "E308",
                lc.path,
                f"'{name}' is produced twice (first by {first.call.target})",
                "each value is produced once per iteration: give this output a new name (e.g. next_"
                f"{name}) and use `carry` to feed it back",
                offset=out.offset,
                length=len(name),
            )
        )
        return
    flow.values[name] = Value(name, vtype, block.name, lc, index)


def _check_carry(block: Block, flow: Dataflow, visible: set[str]) -> None:
    produced_here = {o.text for lc in block.calls for o in lc.call.outputs}
    for target, source in block.carry:
        path = (*block.path, "carry", target)
        if source not in produced_here:
            flow.findings.append(
                error(
                    "E310",
                    path,
                    f"carry source '{source}' is not produced in block '{block.name}'"
                    f"{did_you_mean(source, produced_here)}",
                    "carry: {name: value} feeds a value produced in this block back into `name`",
                )
            )
            continue
        if source not in flow.values:
            continue  # its producing call failed, which is reported there
        if target not in flow.values:
            flow.findings.append(
                error(
                    "E310",
                    path,
                    f"carry target '{target}' has no initial value",
                    f"produce it in `init` (e.g. `init: [env.reset() -> {target}]`)",
                    key=True,
                )
            )
            continue
        t_type, s_type = flow.values[target].type, flow.values[source].type
        if t_type != s_type:
            flow.findings.append(
                error(
                    "E310",
                    path,
                    f"carry mixes types: '{target}' is a {t_type}, '{source}' a {s_type}",
                    "carry a value of the same type",
                )
            )
        flow.uses.setdefault(source, []).append(block.calls[-1])
