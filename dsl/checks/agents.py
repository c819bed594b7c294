"""Multi-agent envs (``env.pettingzoo``): what they combine with, and the global ``state`` value."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl.catalog import TF_AGENT_ENVS, TF_AGENT_OWN_KWARGS
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.diagnostics import quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.groups import assign_groups

#: Learner kinds whose update reads a rollout's ``state`` field (a centralised critic).
STATE_LEARNERS = tuple(
    kind for kind, algo in ALGORITHMS.items() if any(p.type == "state" for m in algo.methods.values() for p in m.inputs)
)


def _env_calls(ctx: Context, method: str) -> Iterator:
    for block in ctx.spec.loop.all_blocks():
        for lc in block.calls:
            if lc.call.component == "env" and lc.call.method == method:
                yield lc


@check
def multi_agent_env(ctx: Context) -> Iterator[Finding]:
    """A PettingZoo env stands alone: no gymnasium id, factory, wrappers, declared spaces or
    normalisation beside it; with one network per agent
    (``agents: {share: false}``) the networks are MLPs, the learners take rollouts and their
    minibatches hold whole env copies.

    ```yaml
    env: {pettingzoo: mpe2.simple_spread_v3, id: CartPole-v1}   # E423: one or the other
    env: {pettingzoo: mpe2.simple_spread_v3, backend: tensorflow,
          kwargs: {render_mode: human}}                       # E428: not a kwarg the in-graph env takes
    env: {pettingzoo: mpe2.simple_spread_v3, agents: {share: false}}
    networks: {pi: {kind: custom, impl: "nets:Torso"}}          # E426: not built once per agent
    ```
    """
    env = ctx.spec.env
    if not env.multi_agent:
        return
    clashes = [
        ("id", env.id is not None),
        ("factory", env.factory is not None),
        ("wrappers", bool(env.wrappers)),
        ("spaces", env.observation is not None or env.action is not None),
        ("normalize", env.normalize is not None),
    ]
    for key, present in clashes:
        if present:
            yield error(
                "E423",
                ("env", key),
                f"`{key}` does not apply to a PettingZoo env (`pettingzoo:`): its agents and spaces come from the env",
                f"remove `{key}`, or remove `pettingzoo` for a single-agent gymnasium env",
            )
    if env.backend == "tensorflow" and env.pettingzoo not in TF_AGENT_ENVS:
        yield error(
            "E423",
            ("env", "backend"),
            f"there is no in-graph TensorFlow version of '{env.pettingzoo}'",
            f"in-graph PettingZoo envs: {quote_list(TF_AGENT_ENVS)}; or use `backend: gymnasium` (the default)",
        )
    yield from _tf_agent_kwargs(env)
    if not env.share:
        yield from _per_agent_networks(ctx)


def _per_agent_networks(ctx: Context) -> Iterator[Finding]:
    """E426: one network per agent (``agents: {share: false}``) is an MLP ensemble applied to
    whole env copies: no custom networks, learners whose minibatches are drawn from a rollout
    (whole copies moved together), and minibatches of whole copies (a multiple of the agents)."""
    for name, net in ctx.spec.networks.items():
        if net.kind == "custom" and ctx.spec.readers(name):
            yield error(
                "E426",
                ("networks", name, "kind"),
                f"network '{name}' is custom, and a custom network cannot be built once per agent "
                "(`agents: {share: false}`): its factory builds one network for every row",
                "use `kind: mlp`, or share the network between the agents (`agents: {share: true}`)",
            )
    rows = ctx.spaces.rows if ctx.spaces else None
    for name, comp in ctx.spec.components.items():
        algo = ALGORITHMS.get(comp.kind)
        if algo is None:
            continue
        if algo.buffer != "rollout":
            yield error(
                "E426",
                ("components", name, "kind"),
                f"a {comp.kind} learner samples single rows, but one network per agent (`agents: {{share: false}}`) "
                "is applied to whole env copies",
                "use a rollout learner (ppo, a2c, ippo, mappo), or share the networks (`agents: {share: true}`)",
            )
        elif rows and algo.has_setting("minibatch") and comp.get("minibatch") is not None:
            mb = comp.get("minibatch")
            if isinstance(mb, int) and mb % rows:
                yield error(
                    "E426",
                    ("components", name, "minibatch"),
                    f"minibatch {mb} is not a multiple of the {rows} agents: with one network per agent "
                    "(`agents: {share: false}`) a minibatch holds whole env copies (its rows count agents)",
                    f"use a multiple of {rows}, e.g. {max(rows, mb - mb % rows)}",
                )


def _tf_agent_kwargs(env) -> Iterator[Finding]:
    """E428: an in-graph PettingZoo env takes only the kwargs it honours; rlgen's own
    (``reward``) only with ``backend: tensorflow``."""
    tf_backend = env.backend == "tensorflow" and env.pettingzoo in TF_AGENT_ENVS
    accepted = TF_AGENT_ENVS[env.pettingzoo] if tf_backend else ()
    for key, value in env.kwargs.items():
        where = ("env", "kwargs", key)
        if key in TF_AGENT_OWN_KWARGS and not tf_backend:
            yield error(
                "E428",
                where,
                f"`{key}` is an option of rlgen's in-graph envs, not of the PettingZoo env",
                f"add `backend: tensorflow` (in-graph: {quote_list(TF_AGENT_ENVS)}), or remove `{key}`",
            )
        elif not tf_backend:
            continue
        elif key not in accepted:
            yield error(
                "E428",
                where,
                f"the in-graph '{env.pettingzoo}' does not take `{key}`",
                f"it accepts {quote_list(accepted)}; or use `backend: gymnasium` for the env's own kwargs",
            )
        elif key in TF_AGENT_OWN_KWARGS and value not in TF_AGENT_OWN_KWARGS[key]:
            yield error(
                "E428", where, f"`{key}: {value}` is not an option", f"use {quote_list(TF_AGENT_OWN_KWARGS[key])}"
            )
        elif key == "continuous_actions" and value is not False:
            yield error(
                "E428",
                where,
                "the in-graph env has discrete actions only",
                "write `continuous_actions: false`, or use `backend: gymnasium`",
            )
        elif key in ("N", "max_cycles") and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            yield error("E428", where, f"`{key}` is a positive integer, got {value!r}", f"e.g. `{key}: 3`")
        elif key == "local_ratio" and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1
        ):
            yield error(
                "E428", where, f"`local_ratio` is a proportion in [0, 1], got {value!r}", "e.g. `local_ratio: 0.5`"
            )


@check
def state_value(ctx: Context) -> Iterator[Finding]:
    """The env returns a ``state`` (its last output) exactly when ``env.state`` asks for one,
    and a rollout that stores it is read by a learner with a centralised critic.

    ```yaml
    env: {pettingzoo: mpe2.simple_spread_v3, state: concat}
    loop:
      init: [env.reset() -> obs]                       # E424: reset must also return the state
    ```
    """
    env = ctx.spec.env
    expected = {"reset": 2, "step": 5}
    # groups: E433; recurrent networks: the env's outputs are fixed (E305 gives the signature)
    for method, with_state in expected.items() if not (env.grouped or ctx.spec.recurrent) else ():
        for lc in _env_calls(ctx, method):
            n = len(lc.call.outputs)
            if n == with_state and not env.state:
                yield error(
                    "E422",
                    lc.path,
                    f"env.{method}() returns a state as its last output, but the env has none"
                    + ("" if env.multi_agent else ": only multi-agent (PettingZoo) envs give a state"),
                    "add `state: concat` (or `env`) under a `pettingzoo` env, or drop the last output",
                )
            elif env.state and n == with_state - 1:
                outs = "obs, state" if method == "reset" else "next_obs, reward, terminated, truncated, next_state"
                yield error(
                    "E424",
                    lc.path,
                    f"the env has a state (`env.state: {env.state}`), so env.{method}() returns "
                    f"{with_state} values; this call takes {n}",
                    f"write `env.{method}({'action' if method == 'step' else ''}) -> {outs}`, or remove `env.state`",
                )
    for name, comp in ctx.spec.components.items():
        if comp.kind != "rollout":
            continue
        stores = any(
            lc.call.component == name
            and lc.call.method == "insert"
            and any(a.text in ctx.flow.values and ctx.flow.values[a.text].type == "state" for a in lc.call.args)
            for block in ctx.spec.loop.all_blocks()
            for lc in block.calls
        )
        calls = [lc.call for b in ctx.spec.loop.all_blocks() for lc in b.calls]
        readers = [
            (lname, learner.kind)
            for lname, learner in ctx.spec.components.items()
            if learner.kind in ALGORITHMS
            and any(c.component == lname and name in [a.text for a in c.args] for c in calls)
        ]
        for lname, kind in readers:
            passes = any(c.component == lname and c.method == "update" and len(c.args) > 2 for c in calls)
            if kind in STATE_LEARNERS and stores != passes:
                yield error(
                    "E427",
                    ("components", lname, "kind"),
                    f"a {kind} learner's critic reads the state when '{name}' stores it and "
                    f"{lname}.update is given the state after the rollout; "
                    + ("the update is not given it" if stores else f"'{name}' does not store it"),
                    "write both: `buffer.insert(..., logp, value, state)` and "
                    f"`{lname}.update({name}, obs, state)` (or neither: an independent critic)",
                )
            if stores and kind not in STATE_LEARNERS:
                yield error(
                    "E427",
                    ("components", lname, "kind"),
                    f"'{name}' stores the state for a centralised critic, but a {kind} learner does not read it",
                    f"use a learner with a centralised critic ({quote_list(STATE_LEARNERS) or 'mappo'}), "
                    "or drop `state` from the buffer's insert",
                )


@check
def agent_groups(ctx: Context) -> Iterator[Finding]:
    """Several agent groups (``env.groups``): each call, carry and learner stays within one
    group, and a network read by several groups sees equal spaces; ``groups`` needs a
    PettingZoo env stepped on the host.

    ```yaml
    env: {pettingzoo: mpe2.simple_tag_v3, groups: {adversaries: [...], good: [agent_0]}}
    loop:
      rollout:
        do: [actor_adv.act(obs_good) -> action_adv]   # E434 (if actor_adv acts for adversaries)
    ```
    """
    env = ctx.spec.env
    if env.groups and not env.multi_agent:
        yield error(
            "E431",
            ("env", "groups"),
            "`groups` name agents of a PettingZoo env, and this env is not one",
            "add `pettingzoo:` (e.g. mpe2.simple_tag_v3), or remove `groups`",
        )
        return
    if not env.grouped:
        return
    if env.backend == "tensorflow":
        yield error(
            "E423",
            ("env", "groups"),
            "the in-graph PettingZoo envs have one group of agents",
            "remove `groups`, or use `backend: gymnasium` (the default)",
        )
    assigned = assign_groups(ctx.spec, ctx.flow)
    yield from assigned.findings
    spaces = ctx.spaces
    if spaces is None or not spaces.groups:
        return
    for net, groups in assigned.networks.items():
        seen = {(g.observation, g.action) for g in spaces.groups if g.name in groups}
        if len(seen) > 1:
            yield error(
                "E434",
                ("networks", net),
                f"network '{net}' is read by groups {quote_list(groups)}, whose spaces differ",
                "give each group its own network",
            )
