"""References between networks, components and the loop; unused names; learner inputs."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl.catalog import (
    COMPONENT_REFS,
    LEARNER_BUFFERS,
    LEARNER_KINDS,
    LEARNER_NEEDS_INSERTED,
    NETWORK_REFS,
    RESERVED_NAMES,
)
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error, warning


@check
def reserved_names(ctx: Context) -> Iterator[Finding]:
    """Names of networks, components and partitions may not be reserved words.

    ```yaml
    components:
      env: {kind: value, network: v}     # E312: 'env' is the environment
    ```
    """
    for section in ("networks", "components"):
        for name in getattr(ctx.spec, section):
            if name in RESERVED_NAMES:
                yield error(
                    "E312",
                    (section, name),
                    f"'{name}' is a reserved word",
                    f"rename it; reserved words are {quote_list(RESERVED_NAMES)}",
                    key=True,
                )
    for name in ctx.spec.networks:
        if name in ctx.spec.components:
            yield error(
                "E312",
                ("networks", name),
                f"'{name}' names both a network and a component",
                "give them different names",
                key=True,
            )


@check
def network_references(ctx: Context) -> Iterator[Finding]:
    """Every ``network:`` (and a learner's own networks, e.g. SAC's ``critic:``) names a defined network.

    ```yaml
    networks: {pi: {kind: mlp}}
    components:
      actor: {kind: policy, network: pii}   # E301 (did you mean 'pi'?)
    ```
    """
    for name, comp in ctx.spec.components.items():
        for key in ("network", *NETWORK_REFS.get(comp.kind, ())):
            net = comp.get(key)
            if net is not None and net not in ctx.spec.networks:
                yield error(
                    "E301",
                    ("components", name, key),
                    f"network '{net}' is not defined{did_you_mean(net, ctx.spec.networks)}",
                    f"define it under `networks:` (defined: {quote_list(ctx.spec.networks) or 'none'})",
                )


@check
def component_references(ctx: Context) -> Iterator[Finding]:
    """A learner's ``policy`` / ``value`` / ``q`` name a component of the right kind.

    ```yaml
    learner: {kind: ppo, policy: critic, value: critic}   # E302: critic is a value, not a policy
    learner: {kind: sac, actor: actor, critic: q}        # E315: unless actor is a squashed_gaussian policy
    ```
    """
    comps = ctx.spec.components
    for name, comp in comps.items():
        for key, kinds in COMPONENT_REFS.get(comp.kind, {}).items():
            ref = comp.get(key)
            path = ("components", name, key)
            if ref is None:
                yield error(
                    "E302",
                    ("components", name),
                    f"{comp.kind} learner '{name}' needs `{key}:`",
                    f"name a component of kind {quote_list(kinds)}",
                )
            elif ref not in comps:
                fitting = [n for n, c in comps.items() if c.kind in kinds]
                yield error(
                    "E302",
                    path,
                    f"component '{ref}' is not defined{did_you_mean(ref, comps)}",
                    f"components of kind {quote_list(kinds)}: {quote_list(fitting) or 'none'}",
                )
            elif comps[ref].kind not in kinds:
                yield error(
                    "E302",
                    path,
                    f"'{ref}' is a {comps[ref].kind} component; `{key}` needs a {' or '.join(sorted(kinds))}",
                    "point it at the right component",
                )
            elif (want := _actor_distribution(comp.kind, key)) and comps[ref].get("distribution") != want:
                yield error(
                    "E315",
                    path,
                    f"{comp.kind} trains a {want} policy; '{ref}' has distribution {comps[ref].get('distribution')}",
                    f"set `distribution: {want}` on component '{ref}'",
                )


def _actor_distribution(kind: str, key: str) -> str | None:
    """The distribution a learner kind needs of the policy it names by ``key`` (if any)."""
    algo = ALGORITHMS.get(kind)
    return algo.actor_distribution if algo is not None and algo.acts == key else None


@check
def unused_names(ctx: Context) -> Iterator[Finding]:
    """Networks and components that nothing uses, and values never consumed, are reported.

    ```yaml
    networks: {pi: {kind: mlp}, old: {kind: mlp}}   # W320: network 'old' is never used
    ```
    """
    spec = ctx.spec
    used_nets = {c.get(key) for c in spec.components.values() for key in ("network", *NETWORK_REFS.get(c.kind, ()))}
    for name in spec.networks:
        if name not in used_nets:
            yield warning(
                "W320",
                ("networks", name),
                f"network '{name}' is never used",
                "remove it, or use it in a component's `network:`",
                key=True,
            )
    referenced = {c.call.call.component for c in ctx.flow.calls} | set(ctx.flow.component_args)
    for comp in spec.components.values():
        referenced |= {comp.get(key) for key in COMPONENT_REFS.get(comp.kind, {})}
    for name in spec.components:
        if name not in referenced:
            yield warning(
                "W321",
                ("components", name),
                f"component '{name}' is never used by the loop",
                "call one of its methods in `loop:` or remove it",
                key=True,
            )
    methods = {id(c.call): c.method for c in ctx.flow.calls}
    for name, value in ctx.flow.values.items():
        if name in ctx.flow.uses or value.type == "metrics":
            continue
        # Only warn where the user can act: an optional output, or a call none of whose outputs is used.
        method = methods.get(id(value.producer))
        # (an output past the method's own, E305 at the call, is neither)
        optional = method is not None and value.index < len(method.outputs) and method.outputs[value.index].optional
        if optional or not any(o.text in ctx.flow.uses for o in value.producer.call.outputs):
            off = value.producer.call.outputs[value.index].offset
            yield warning(
                "W322",
                value.producer.path,
                f"value '{name}' is produced but never used",
                "remove it (or the call) or use it",
                offset=off,
                length=len(name),
            )


@check
def learner_inputs(ctx: Context) -> Iterator[Finding]:
    """An on-policy learner is updated from a rollout buffer that stores what it needs.

    ```yaml
    loop:
      rollout: [..., buffer.insert(obs, action, reward, terminated, truncated)]
      learn: [learner.update(buffer, obs) -> metrics]   # E331: ppo needs logp and value inserted
    ```
    """
    comps = ctx.spec.components
    for info in ctx.flow.calls:
        if info.kind not in LEARNER_KINDS or info.method.name != "update" or not info.call.call.args:
            continue
        arg = info.call.call.args[0]
        need = LEARNER_BUFFERS.get(info.kind)
        if need is None or arg.text not in comps:
            continue
        buf = comps[arg.text]
        if buf.kind != need:
            yield error(
                "E330",
                info.call.path,
                f"{info.kind} learns from a {need} buffer; '{arg.text}' is a {buf.kind} buffer",
                f"pass a component of kind {need}",
                offset=arg.offset,
                length=len(arg.text),
            )
            continue
        inserted = ctx.flow.inserted.get(arg.text)
        if inserted is None:
            yield error(
                "E331",
                info.call.path,
                f"nothing is inserted into '{arg.text}' before it is learned from",
                f"call {arg.text}.insert(...) in the loop",
                offset=arg.offset,
                length=len(arg.text),
            )
            continue
        missing = [f for f in LEARNER_NEEDS_INSERTED.get(info.kind, ()) if f not in inserted]
        if missing:
            ins = ctx.flow.calls_to(f"{arg.text}.insert")[0]
            yield error(
                "E331",
                ins.call.path,
                f"{info.kind} needs {' and '.join(missing)} in the rollout "
                f"buffer, but {arg.text}.insert does not pass {'them' if len(missing) > 1 else 'it'}",
                f"insert them: {arg.text}.insert(obs, action, reward, terminated, truncated, logp, value)",
                offset=0,
            )


@check
def rollout_length(ctx: Context) -> Iterator[Finding]:
    """A rollout buffer's ``length`` matches the ``repeat`` of the block that fills it.

    ```yaml
    buffer: {kind: rollout, length: 64}
    loop: {rollout: {repeat: 32, do: [..., buffer.insert(...)]}}   # E332
    ```
    """
    for name, comp in ctx.spec.components.items():
        if comp.kind != "rollout":
            continue
        inserts = ctx.flow.calls_to(f"{name}.insert")
        if len(inserts) > 1:
            yield error(
                "E332",
                inserts[1].call.path,
                f"'{name}' is filled by more than one insert call",
                "insert once per step",
                offset=0,
            )
        length = comp.get("length")
        if inserts and length is not None and length != inserts[0].block.repeat:
            yield error(
                "E332",
                ("components", name, "length"),
                f"rollout length {length} differs from the repeat ({inserts[0].block.repeat}) of "
                f"block '{inserts[0].block.name}' that fills it",
                "omit `length` (it defaults to the block's repeat) or make them equal",
            )


@check
def loop_shape(ctx: Context) -> Iterator[Finding]:
    """The loop steps the environment and something learns.

    ```yaml
    loop: {learn: [learner.update(buffer, obs) -> metrics]}   # E333: env.step is never called
    ```
    """
    if not ctx.flow.calls_to("env.step"):
        yield error(
            "E333",
            ("loop",),
            "the loop never calls env.step",
            "add `env.step(action) -> next_obs, reward, terminated, truncated` to a block",
            key=True,
        )
    learns = [c for c in ctx.flow.calls if c.kind in LEARNER_KINDS | {"custom"}]
    if not learns and ctx.flow.calls:
        yield warning(
            "W334",
            ("loop",),
            "no learner is updated in the loop: the agent will not learn",
            "call a learner's update, e.g. learner.update(buffer, obs) -> metrics",
            key=True,
        )
    for block in ctx.spec.loop.blocks:
        if not block.calls:
            yield warning("W335", block.path, f"block '{block.name}' has no calls", "remove it", key=True)
    if ctx.spec.loop.init:
        for lc in ctx.spec.loop.init.calls:
            if lc.call.target == "env.step":
                yield error(
                    "E336",
                    lc.path,
                    "env.step in `init` would not be counted as training steps",
                    "init is for env.reset() and other start-up calls",
                    offset=0,
                )
