"""Partition points: each names a real place in the loop, and lists what crosses it."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.dsl.catalog import COMPONENT_REFS, LEARNER_KINDS
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.spec import Partition


def _crossing_names(ctx: Context) -> set[str]:
    """Names that may cross a cut: every output named in the loop (even of a call that did not
    resolve, to avoid follow-on errors), components, networks and ``weights``."""
    outputs = {o.text for b in ctx.spec.loop.all_blocks() for lc in b.calls for o in lc.call.outputs}
    return outputs | set(ctx.spec.components) | set(ctx.spec.networks) | {"weights"}


@check
def partition_targets(ctx: Context) -> Iterator[Finding]:
    """``at`` names a call of the loop, ``after`` a block of the loop.

    ```yaml
    partitions:
      env: {at: env.stpe, send: [action], receive: [next_obs]}   # E501 (did you mean 'env.step'?)
      rollout: {after: rolout, send: [buffer]}                   # E502
    ```
    """
    targets = {c.call.call.target for c in ctx.flow.calls}
    blocks = {b.name for b in ctx.spec.loop.blocks}
    for name, part in ctx.spec.partitions.items():
        path = ("partitions", name)
        if (part.at is None) == (part.after is None):
            yield error(
                "E500",
                path,
                f"partition '{name}' needs exactly one of `at` (a call) or `after` (a block)",
                "e.g. `at: env.step` or `after: rollout`",
                key=True,
            )
            continue
        if part.at is not None and part.at not in targets:
            yield error(
                "E501",
                (*path, "at"),
                f"the loop has no call '{part.at}'{did_you_mean(part.at, targets)}",
                f"calls in the loop: {quote_list(targets)}",
            )
        if part.after is not None and part.after not in blocks:
            yield error(
                "E502",
                (*path, "after"),
                f"the loop has no block '{part.after}'{did_you_mean(part.after, blocks)}",
                f"blocks: {quote_list(blocks)}",
            )


@check
def partition_values(ctx: Context) -> Iterator[Finding]:
    """``send``/``receive`` name values, components or networks of the spec; ``reduce`` only ``gradients``.

    ```yaml
    partitions:
      env: {at: env.step, send: [actions], receive: [next_obs]}   # E503: no value 'actions'
    ```
    """
    known = _crossing_names(ctx)
    for name, part in ctx.spec.partitions.items():
        for field in ("send", "receive"):
            for i, item in enumerate(getattr(part, field)):
                if item not in known:
                    yield error(
                        "E503",
                        ("partitions", name, field, i),
                        f"'{item}' is not a value, component or network of this spec{did_you_mean(item, known)}",
                        "list values produced in the loop, buffers, networks, or `weights`",
                    )
        for i, item in enumerate(part.reduce):
            if item != "gradients":
                yield error(
                    "E503",
                    ("partitions", name, "reduce", i),
                    f"cannot reduce '{item}'",
                    "a learner cut reduces `gradients`",
                )


def _env_cut(ctx: Context, name: str, part: Partition) -> Iterator[Finding]:
    path = ("partitions", name)
    if part.at != "env.step":
        yield error(
            "E504",
            (*path, "at"),
            f"only env.step can be cut with send/receive (got '{part.at}')",
            "cut a learner with `reduce: [gradients]`, or acting from learning with `after: BLOCK`",
        )
        return
    steps = ctx.flow.calls_to("env.step")
    if not steps:
        return
    call = steps[0].call.call
    unsent = [a.text for a in call.args if a.text not in part.send]
    if unsent:
        yield error(
            "E505",
            (*path, "send"),
            f"{quote_list(unsent)} go{'es' * (len(unsent) == 1)} into env.step "
            "across this cut, but `send` does not list "
            f"{'it' if len(unsent) == 1 else 'them'}",
            f"send: [{', '.join([*part.send, *unsent])}]",
        )
    unreceived = [o.text for o in call.outputs if o.text in ctx.flow.uses and o.text not in part.receive]
    if unreceived:
        yield error(
            "E505",
            (*path, "receive"),
            f"{quote_list(unreceived)} come{'s' * (len(unreceived) == 1)} "
            "out of env.step and are used on the other side of this cut, but `receive` does not list "
            f"{'it' if len(unreceived) == 1 else 'them'}",
            f"receive: [{', '.join([*part.receive, *unreceived])}]",
        )


def _experience_cut(ctx: Context, name: str, part: Partition) -> Iterator[Finding]:
    path = ("partitions", name)
    order = [b.name for b in ctx.spec.loop.all_blocks()]
    if part.after not in order:
        return
    cut = order.index(part.after)
    before = set(order[: cut + 1])
    missing: dict[str, str] = {}
    for info in ctx.flow.calls:
        if info.block.name in before:
            continue
        for arg in info.call.call.args:
            value = ctx.flow.values.get(arg.text)
            crosses = (value is not None and value.block in before) or (
                arg.text in ctx.flow.component_args
                and any(c.block.name in before for c in ctx.flow.calls_to(f"{arg.text}.insert"))
            )
            if crosses and arg.text not in part.send:
                missing.setdefault(arg.text, info.call.call.target)
    if missing:
        users = ", ".join(sorted(set(missing.values())))
        yield error(
            "E506",
            (*path, "send"),
            f"{quote_list(missing)} {'is' if len(missing) == 1 else 'are'} "
            f"produced before this cut and used after it (by {users}), but `send` does not list "
            f"{'it' if len(missing) == 1 else 'them'}",
            f"send: [{', '.join([*part.send, *missing])}]",
        )
    acting_nets = {
        ctx.spec.components[c.call.call.component].get("network")
        for c in ctx.flow.calls
        if c.block.name in before and c.call.call.component in ctx.spec.components
    } - {None}
    trained = set()
    for info in ctx.flow.calls:
        if info.block.name not in before and info.kind in LEARNER_KINDS:
            comp = ctx.spec.components[info.call.call.component]
            for key in COMPONENT_REFS.get(comp.kind, {}):
                ref = ctx.spec.components.get(comp.get(key))
                if ref is not None:
                    trained.add(ref.get("network"))
    stale = sorted(acting_nets & trained - set(part.receive))
    if stale and "weights" not in part.receive:
        yield error(
            "E506",
            (*path, "receive"),
            f"the learner trains {quote_list(stale)} after this cut, "
            "but the acting side never receives the new weights",
            "add `receive: [weights]`",
        )


def _gradient_cut(ctx: Context, name: str, part: Partition) -> Iterator[Finding]:
    comp = ctx.spec.components.get((part.at or "").split(".")[0])
    if part.at is None or comp is None or comp.kind not in LEARNER_KINDS or not part.at.endswith(".update"):
        yield error(
            "E507",
            ("partitions", name, "at" if part.at else "after"),
            "gradients can only be reduced at a learner's update",
            "write `at: LEARNER.update` with `reduce: [gradients]`",
        )


@check
def partition_crossings(ctx: Context) -> Iterator[Finding]:
    """Everything that flows across a cut is listed, so every policy gets the data it needs.

    ```yaml
    partitions:
      env: {at: env.step, send: [action], receive: [next_obs]}   # E505: reward is used but not received
    ```
    """
    targets = {c.call.call.target for c in ctx.flow.calls}
    for name, part in ctx.spec.partitions.items():
        if (part.at is None) == (part.after is None) or (part.at is not None and part.at not in targets):
            continue  # already reported by partition_targets
        kind_checks = {"env": _env_cut, "experience": _experience_cut, "gradients": _gradient_cut}
        yield from kind_checks[part.kind](ctx, name, part)
