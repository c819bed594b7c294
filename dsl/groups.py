"""Agent groups (``env.groups``): the env's grouped signatures and which group each value,
component and network belongs to.

With several groups, ``env.reset()`` and ``env.step()`` take and return one value of each kind
per group, group by group in the order ``env.groups`` lists them (each group's run reads as the
single-group signature)::

    env.reset() -> obs_a, obs_b                                  # + state_a after obs_a, ... (env.state)
    env.step(action_a, action_b) -> next_obs_a, reward_a, terminated_a, truncated_a,
                                    next_obs_b, reward_b, terminated_b, truncated_b

Every other value takes its group from the call that produces it: a component's call belongs to
the group of the values it reads (all of one group), and the component then belongs to it too.
The code generator sizes each value by its group (its agents' rows, its spaces). Imports nothing
outside the language.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlgen.dsl.catalog import COMPONENT_REFS, group_outputs
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.spec import Spec


@dataclass
class GroupAssignment:
    """Which group each value and component belongs to (``None``: no group, e.g. an unread
    component), and the groups whose components read each network."""

    values: dict[str, str] = field(default_factory=dict)
    components: dict[str, str] = field(default_factory=dict)
    networks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def assign_groups(spec: Spec, flow: Dataflow) -> GroupAssignment:
    """Walk the loop's calls in order and give every value and component its group; a call
    that mixes groups is an E434 finding (reported once per call)."""
    out = GroupAssignment()
    if not spec.env.grouped:
        return out
    names = tuple(g for g, _ in spec.env.groups)
    state = bool(spec.env.state)
    for info in flow.calls:
        lc, call = info.call, info.call.call
        if call.component == "env":
            per = group_outputs(call.method, state)
            for i, o in enumerate(call.outputs):
                out.values[o.text] = names[min(i // per, len(names) - 1)]
            for j, arg in enumerate(call.args):
                got = out.values.get(arg.text)
                if j < len(names) and got is not None and got != names[j]:
                    out.findings.append(
                        error(
                            "E434",
                            lc.path,
                            f"env.step's argument {j + 1} is the action of group '{names[j]}', but '{arg.text}' "
                            f"belongs to group '{got}'",
                            f"pass the actions in the groups' order ({', '.join(names)})",
                            offset=arg.offset,
                            length=len(arg.text),
                        )
                    )
            continue
        seen: dict[str, str] = {}  # group -> what brought it
        if call.component in out.components:
            seen[out.components[call.component]] = f"'{call.component}'"
        for arg in call.args:
            g = out.components.get(arg.text) if arg.text in spec.components else out.values.get(arg.text)
            if g is not None:
                seen.setdefault(g, f"'{arg.text}'")
        if len(seen) > 1:
            what = ", ".join(f"{v} of group '{g}'" for g, v in seen.items())
            out.findings.append(
                error(
                    "E434",
                    lc.path,
                    f"{call.target} mixes agent groups ({what}): each group is its own batch",
                    "give each group its own components and values (e.g. `actor_good.act(obs_good)`)",
                )
            )
        group = next(iter(seen), None)
        if group is None:
            continue
        out.components.setdefault(call.component, group)
        for o in call.outputs:
            out.values[o.text] = group
    for block in spec.loop.all_blocks():
        for dst, src in block.carry:
            a, b = out.values.get(dst), out.values.get(src)
            if a is not None and b is not None and a != b:
                out.findings.append(
                    error(
                        "E434",
                        (*block.path, "carry", dst),
                        f"carry feeds '{src}' (group '{b}') into '{dst}' (group '{a}')",
                        "carry each group's values into its own",
                    )
                )
    for name, comp in spec.components.items():  # a learner's policy and value are its group's
        for key in COMPONENT_REFS.get(comp.kind, ()):
            ref = comp.get(key)
            if ref in spec.components and name in out.components:
                g = out.components[name]
                if out.components.setdefault(ref, g) != g:
                    out.findings.append(
                        error(
                            "E434",
                            ("components", name, key),
                            f"'{name}' learns for group '{g}', but its {key} '{ref}' acts for group "
                            f"'{out.components[ref]}'",
                            "give each group its own learner",
                        )
                    )
    readers: dict[str, list[str]] = {}
    for name, comp in spec.components.items():
        net = comp.get("network")
        if net is not None and name in out.components:
            readers.setdefault(net, []).append(out.components[name])
    out.networks = {net: tuple(dict.fromkeys(gs)) for net, gs in readers.items()}
    return out
