"""Recurrent networks (``networks.<n>.recurrent``): what they combine with, and the carried
states and ``first`` flags the loop passes (see :mod:`rlgen.dsl.memory`)."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.memory import hidden_readers, state_size, stored_memory

#: Learner kinds that train recurrent networks (on chunks of stored states).
RECURRENT_LEARNERS = ("mappo", "ippo")


@check
def recurrent_networks(ctx: Context) -> Iterator[Finding]:
    """E437: a recurrent network is an MLP read by one policy or one value, on a PettingZoo env
    whose agents share it, without agent groups or gSDE.

    ```yaml
    env: {id: CartPole-v1}
    networks: {pi: {kind: mlp, recurrent: {size: 64}}}   # E437: PettingZoo envs only, for now
    ```
    """
    spec = ctx.spec
    env = spec.env
    for name, net in spec.networks.items():
        if not net.recurrent:
            continue
        where = ("networks", name, "recurrent")
        readers = [c for c in spec.components.values() if c.get("network") == name or name in c.settings.values()]
        if not env.multi_agent:
            yield error(
                "E437",
                where,
                f"network '{name}' is recurrent, but recurrent networks run on PettingZoo envs only "
                "(`env.pettingzoo`) in this release",
                "drop `recurrent`, or train on a multi-agent env with mappo or ippo",
                key=True,
            )
        elif env.grouped or not env.share:
            what = "several agent groups (`env.groups`)" if env.grouped else "one network per agent (`share: false`)"
            yield error(
                "E437",
                where,
                f"network '{name}' is recurrent, but recurrent networks do not run with {what} in this release",
                "drop `recurrent`, or train one group whose agents share the networks",
                key=True,
            )
        elif len(readers) > 1 or (readers and readers[0].kind not in ("policy", "value")):
            names = ", ".join(f"'{c.name}' ({c.kind})" for c in readers)
            yield error(
                "E437",
                where,
                f"recurrent network '{name}' is read by {names}: a recurrent network is one policy's or one value's",
                "give the policy and the value each its own network (`recurrent` on each)",
                key=True,
            )
        elif readers and readers[0].get("gsde"):
            yield error(
                "E437",
                where,
                f"recurrent network '{name}' is read by policy '{readers[0].name}', which explores with gSDE",
                f"drop `gsde` from components.{readers[0].name}, or `recurrent` from the network",
                key=True,
            )


@check
def recurrent_states(ctx: Context) -> Iterator[Finding]:
    """E438: a rollout insert stores ``first`` and the states the recurrent calls *read*, one
    for each recurrent policy and value, as they read them.

    ```yaml
    - actor.act(obs, h, first) -> action, logp, next_h
    - buffer.insert(obs, action, reward, terminated, truncated, logp, value, state, first, next_h)  # E438
    ```
    """
    spec, flow = ctx.spec, ctx.flow
    if not spec.recurrent:
        return
    readers = hidden_readers(flow)
    firsts = {lc.call.args[2].text for lc in readers.values()}
    for info in flow.calls:
        lc = info.call
        if info.kind != "rollout" or info.method.name != "insert":
            continue
        args = tuple(a.text for a in lc.call.args)
        for arg in lc.call.args:
            vtype = flow.values[arg.text].type if arg.text in flow.values else None
            if vtype == "hidden" and arg.text not in readers:
                yield error(
                    "E438",
                    lc.path,
                    f"'{arg.text}' is not a state a recurrent call reads: store the state `act`/`value` read "
                    "at this step, not the one they return",
                    "store " + (" and ".join(f"'{h}'" for h in readers) or "the state the call reads"),
                    offset=arg.offset,
                    length=len(arg.text),
                )
            elif vtype == "first" and firsts and arg.text not in firsts:
                yield error(
                    "E438",
                    lc.path,
                    f"'{arg.text}' is not the `first` the recurrent calls read at this step",
                    "store " + " or ".join(f"'{f}'" for f in sorted(firsts)),
                    offset=arg.offset,
                    length=len(arg.text),
                )
        stored = stored_memory(spec, flow, args)
        for hidden, reader in readers.items():
            kind = spec.components[reader.call.component].kind
            mine = stored.policy if stored and kind == "policy" else stored.value if stored else None
            if mine != hidden:
                yield error(
                    "E438",
                    lc.path,
                    f"{lc.call.target} does not store '{hidden}', the state {reader.call.target} reads: the "
                    "update unrolls each sequence from it",
                    f"pass '{hidden}' after `first`",
                    offset=0,
                )


@check
def recurrent_learners(ctx: Context) -> Iterator[Finding]:
    """E439: a learner of recurrent networks is mappo or ippo, with PPO's ratio (no V-trace), a
    minibatch of whole chunks, and its recurrent value's state after the rollout in ``update``.

    ```yaml
    learner: {kind: mappo, policy: actor, value: critic, chunk: 10, minibatch: 25}   # E439
    ```
    """
    spec, flow = ctx.spec, ctx.flow
    if not spec.recurrent:
        return
    readers = hidden_readers(flow)
    for name, comp in spec.components.items():
        refs = [comp.get(r) for r in ("policy", "value") if comp.get(r) in spec.components]
        if not refs or not any(state_size(spec, r) for r in refs):
            continue
        where = ("components", name)
        if comp.kind not in RECURRENT_LEARNERS:
            yield error(
                "E439",
                (*where, "kind"),
                f"a {comp.kind} learner does not train recurrent networks",
                "use `kind: mappo` or `kind: ippo`, or drop `recurrent` from the networks",
            )
            continue
        if comp.get("correction") == "vtrace":
            yield error(
                "E439",
                (*where, "correction"),
                "V-trace does not combine with recurrent networks in this release",
                "use `correction: ratio`",
            )
        minibatch, chunk = comp.get("minibatch"), int(comp.get("chunk", 10))
        if minibatch is not None and int(minibatch) % chunk:
            yield error(
                "E439",
                (*where, "minibatch"),
                f"a minibatch of recurrent networks holds whole chunks of {chunk} steps; {minibatch} is not a "
                "multiple of `chunk`",
                f"use a multiple of {chunk} (e.g. {max(chunk, int(minibatch) // chunk * chunk)}), or null for the "
                "whole rollout",
            )
        value_state = next((h for h, r in readers.items() if r.call.component == comp.get("value")), None)
        for info in flow.calls:
            lc = info.call
            if lc.call.component != name or info.method.name != "update":
                continue
            hidden = [a for a in lc.call.args if a.text in flow.values and flow.values[a.text].type == "hidden"]
            if value_state is not None and not hidden:
                yield error(
                    "E439",
                    lc.path,
                    f"{lc.call.target} needs the state of the recurrent value after the rollout, "
                    f"'{value_state}', to bootstrap from",
                    f"pass it last: {lc.call.target}({', '.join(a.text for a in lc.call.args)}, {value_state})",
                    offset=0,
                )
            elif hidden and hidden[0].text != value_state:
                yield error(
                    "E439",
                    lc.path,
                    f"'{hidden[0].text}' is not the state the recurrent value reads"
                    + ("" if value_state else ": the value is not recurrent"),
                    f"pass '{value_state}'" if value_state else "drop it",
                    offset=hidden[0].offset,
                    length=len(hidden[0].text),
                )
