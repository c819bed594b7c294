"""Finding an environment's spaces without TensorFlow: declared, known, or asked of gymnasium."""

from __future__ import annotations

import math
import os

from rlgen.dsl import atari, atari_envpool
from rlgen.dsl.catalog import KNOWN_ENVS, TF_AGENT_ENVS, TF_AGENT_OWN_KWARGS, EnvSpaces, GroupSpaces, Space
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.spec import EnvSpec, SpaceDecl
from rlgen.dsl.wrappers import problem, wrapper_class


def quiet_mujoco(env_id: str | None) -> None:
    """Before a MuJoCo env is made: MuJoCo's warnings are dropped (gymnasium's Hopper model
    triggers a deprecation warning per env, dozens per run), instead of going to stdout and a
    ``MUJOCO_LOG.TXT`` in the working directory. ``RLGEN_DEBUG=1`` keeps MuJoCo's own handling;
    envs that are not MuJoCo's are left alone."""
    from gymnasium.envs.registration import registry

    spec = registry.get(env_id) if env_id else None
    if os.environ.get("RLGEN_DEBUG") or spec is None or "mujoco" not in str(spec.entry_point):
        return
    import mujoco

    mujoco.set_mju_user_warning(_drop)


def _drop(message: str) -> None:
    """A MuJoCo warning handler that keeps nothing."""


def _declared(decl: SpaceDecl | None) -> Space | None:
    if decl is None:
        return None
    if decl.n is not None:
        return Space("discrete", n=decl.n)
    return Space("box", decl.shape or (), low=decl.low, high=decl.high)


def _from_gym_space(space) -> Space | None:
    import numpy as np  # gymnasium depends on numpy

    if hasattr(space, "n") and getattr(space, "shape", None) == ():
        return Space("discrete", n=int(space.n))
    if hasattr(space, "low") and hasattr(space, "shape"):
        low, high = np.asarray(space.low), np.asarray(space.high)
        scalar = low.size and np.all(low == low.flat[0]) and np.all(high == high.flat[0])
        return Space(
            "box",
            tuple(int(s) for s in space.shape),
            low=float(low.flat[0]) if scalar else None,
            high=float(high.flat[0]) if scalar else None,
            dtype="uint8" if np.dtype(space.dtype) == np.uint8 else "float32",
        )
    return None


def resolve_spaces(env: EnvSpec) -> tuple[EnvSpaces | None, list[Finding]]:
    """The env's spaces and any finding about the env id (unknown id, cannot read spaces)."""
    if env.multi_agent:
        return agent_spaces(env)
    obs, act = _declared(env.observation), _declared(env.action)
    if obs and act:
        return EnvSpaces(obs, act, env.max_episode_steps), []
    if env.factory:
        return None, [
            error(
                "E405",
                ("env", "factory"),
                "the spaces of a custom env are not declared: the generated code needs the loop's shapes, "
                "and the action-space fit cannot be checked before launch",
                "declare them: `spaces: {observation: {shape: [4]}, action: {n: 2}}`",
            )
        ]
    if any(w.custom for w in env.wrappers):
        return None, [
            error(
                "E405",
                ("env", "wrappers"),
                "a custom wrapper may change the env's spaces, and it is imported only by `rlgen run`: "
                "the generated code needs the spaces the loop sees",
                "declare the wrapped env's spaces: `spaces: {observation: {shape: [4]}, action: {n: 2}}`",
            )
        ]
    if env.backend == "envpool":
        return _envpool_spaces(env)
    if env.id in KNOWN_ENVS and not env.wrappers:
        known = KNOWN_ENVS[env.id]
        return EnvSpaces(obs or known.observation, act or known.action, known.max_episode_steps), []
    try:
        import gymnasium
        from gymnasium.envs.registration import registry
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return None, []
    if env.preset == "atari":
        try:
            atari.register()
        except ImportError:
            return None, [
                error(
                    "E405",
                    ("env", "preset"),
                    "the atari preset needs ale-py, which is not installed",
                    "`pip install rlgen[atari]` (ale-py, with the game ROMs)",
                )
            ]
    if env.id not in registry:
        return None, [
            error(
                "E401",
                ("env", "id"),
                f"'{env.id}' is not a registered gymnasium environment"
                f"{did_you_mean(env.id, list(registry) + list(KNOWN_ENVS))}",
                'use a gymnasium id such as CartPole-v1, or `factory: "pkg.module:make_env"` for your own env',
            )
        ]
    if any(problem(w) for w in env.wrappers):
        return None, []  # env_source reports them
    try:
        quiet_mujoco(env.id)
        made = atari.make(env.id, env.kwargs) if env.preset == "atari" else gymnasium.make(env.id, **env.kwargs)
    except Exception as exc:  # any failure of third-party env code becomes a finding
        return None, [
            error(
                "E405",
                ("env", "id"),
                f"could not create '{env.id}' to read its spaces: {exc}",
                "install what it needs, or declare `spaces:` under `env:`",
            )
        ]
    for i, wrapper in enumerate(env.wrappers):
        try:
            made = wrapper_class(wrapper)(made, **wrapper.kwargs)
        except Exception as exc:  # a wrapper refusing this env or these arguments
            made.close()
            return None, [
                error(
                    "E411",
                    ("env", "wrappers", i),
                    f"`{wrapper.name}` could not wrap '{env.id}': {exc}",
                    "check its arguments against gymnasium's documentation of the wrapper",
                )
            ]
    try:
        o, a = _from_gym_space(made.observation_space), _from_gym_space(made.action_space)
        limit = made.unwrapped.spec.max_episode_steps if made.unwrapped.spec else None
    finally:
        made.close()
    if o is None or a is None:
        return None, [
            error(
                "E405",
                ("env", "id"),
                f"the spaces of '{env.id}' are not supported by rlgen v1",
                "use a Box observation and a Discrete or Box action space",
            )
        ]
    return EnvSpaces(obs or o, act or a, env.max_episode_steps or limit), []


def _envpool_spaces(env: EnvSpec) -> tuple[EnvSpaces | None, list[Finding]]:
    """The spaces of ``backend: envpool``'s env, from envpool's own spec; none where the id,
    the kwargs or the install are refused (the ``envpool_backend`` check says why, E436)."""
    if env.wrappers or set(env.kwargs) - set(atari_envpool.KWARGS) or not atari_envpool.installed():
        return None, []
    task = atari_envpool.task_id(env.id)
    if task is None or task not in atari_envpool.known_tasks():
        return None, []
    try:
        o, a = atari_envpool.spaces(env.id or "", env.kwargs)
    except Exception as exc:  # a kwarg value envpool refuses
        return None, [error("E405", ("env", "kwargs"), f"envpool could not make '{task}': {exc}", "check `kwargs`")]
    return EnvSpaces(_from_gym_space(o), _from_gym_space(a), env.max_episode_steps), []


def _space(data: dict) -> Space | None:
    if "n" in data:
        return Space("discrete", n=int(data["n"]))
    if "shape" in data:
        return Space("box", tuple(data["shape"]), low=data.get("low"), high=data.get("high"))
    return None


def agent_spaces(env: EnvSpec) -> tuple[EnvSpaces | None, list[Finding]]:
    """A PettingZoo env's agents and spaces, read in a limited child process. Without
    ``env.groups`` all agents form one group and must have equal spaces; every per-agent value
    gets ``len(agents)`` rows per env copy. With groups, each group's agents must have equal spaces
    and each group's values get its agents' rows."""
    from rlgen.dsl.agents import ProbeError, read_agent_spaces

    kwargs = dict(env.kwargs)
    if env.pettingzoo in TF_AGENT_ENVS:
        # the in-graph env has the PettingZoo env's agents and spaces: read them from the env without
        # rlgen's own kwargs (`reward`), and in-graph with only those the spaces depend on (E428
        # reports any other, and values the in-graph env refuses)
        kwargs = {k: v for k, v in kwargs.items() if k not in TF_AGENT_OWN_KWARGS}
        if env.backend == "tensorflow":
            kwargs = {k: v for k, v in kwargs.items() if k in ("N", "max_cycles")}  # what the spaces depend on
    try:
        got = read_agent_spaces(env.pettingzoo, kwargs, env.state)
    except ProbeError as exc:
        return None, [
            error(
                "E420",
                ("env", "pettingzoo"),
                f"could not make the PettingZoo env '{env.pettingzoo}' to read its agents and spaces: {exc}",
                "check the module path and `kwargs` (e.g. `pettingzoo: mpe2.simple_spread_v3`; "
                "`pip install rlgen[marl]` installs mpe2)",
            )
        ]
    if not got.agents:
        return None, [error("E421", ("env", "pettingzoo"), f"'{env.pettingzoo}' has no agents", "check `kwargs`")]
    if env.groups:
        return _grouped_spaces(env, got)
    obs, act = got.observations[0], got.actions[0]
    differ = [a for a, o, x in zip(got.agents, got.observations, got.actions, strict=True) if (o, x) != (obs, act)]
    if differ:
        return None, [
            error(
                "E421",
                ("env", "pettingzoo"),
                f"agents {got.agents[0]} and {differ[0]} have different spaces ({obs}, {act} against "
                f"{got.observations[got.agents.index(differ[0])]}, {got.actions[got.agents.index(differ[0])]}): "
                "rlgen folds every agent into one batch, so they must match",
                "use an env whose agents share their spaces (e.g. simple_spread_v3), or give each kind of "
                "agent its own group: `groups: {name: [agent, ...], ...}`",
            )
        ]
    o, a = _space(obs), _space(act)
    if o is None or o.kind != "box" or a is None or a.kind != "discrete":
        return None, [_unsupported(obs, act)]
    if env.state == "concat":
        size = 1
        for d in o.shape:
            size *= int(d)
        state: tuple[int, ...] | None = (size * len(got.agents),)
    else:
        state = got.state
    limit = env.max_episode_steps or got.max_cycles
    return EnvSpaces(o, a, limit, agents=got.agents, state=state), []


def _unsupported(obs: dict, act: dict, where: tuple = ("env", "pettingzoo")) -> Finding:
    return error(
        "E421",
        where,
        f"the agents' spaces ({obs}, {act}) are not supported for multi-agent envs",
        "use Box observations and Discrete actions (for MPE: `kwargs: {continuous_actions: false}`)",
    )


def _grouped_spaces(env: EnvSpec, got) -> tuple[EnvSpaces | None, list[Finding]]:
    """``env.groups``: every agent of the env in exactly one non-empty group, each group's agents
    with equal spaces (E429-E432). Agents keep the groups' order (group by group)."""
    findings: list[Finding] = []
    seen: dict[str, str] = {}
    index = {a: i for i, a in enumerate(got.agents)}
    for name, agents in env.groups:
        if not agents:
            findings.append(
                error(
                    "E429",
                    ("env", "groups", name),
                    f"group '{name}' has no agents",
                    f"list its agents (the env's are {quote_list(got.agents)}), or remove the group",
                )
            )
        for i, agent in enumerate(agents):
            if agent not in index:
                findings.append(
                    error(
                        "E431",
                        ("env", "groups", name, i),
                        f"'{agent}' is not an agent of '{env.pettingzoo}'{did_you_mean(agent, got.agents)}",
                        f"its agents are {quote_list(got.agents)}",
                    )
                )
            elif agent in seen:
                findings.append(
                    error(
                        "E430",
                        ("env", "groups", name, i),
                        f"agent '{agent}' is in two groups ('{seen[agent]}' and '{name}')",
                        "put each agent in exactly one group",
                    )
                )
            else:
                seen[agent] = name
    missing = [a for a in got.agents if a not in seen]
    if missing and not findings:
        findings.append(
            error(
                "E431",
                ("env", "groups"),
                f"agent(s) {quote_list(missing)} of '{env.pettingzoo}' are in no group: every agent acts in every step",
                f"add them to a group (e.g. `{missing[0]}` to group '{env.groups[-1][0]}')",
            )
        )
    if findings:
        return None, findings
    groups = []
    for name, agents in env.groups:
        obs, act = got.observations[index[agents[0]]], got.actions[index[agents[0]]]
        for i, agent in enumerate(agents[1:], 1):
            o2, a2 = got.observations[index[agent]], got.actions[index[agent]]
            if (o2, a2) != (obs, act):
                return None, [
                    error(
                        "E432",
                        ("env", "groups", name, i),
                        f"agents {agents[0]} and {agent} of group '{name}' have different spaces ({obs}, {act} "
                        f"against {o2}, {a2}): a group is one batch, so its agents' spaces must match",
                        f"move '{agent}' to a group of agents with its spaces",
                    )
                ]
        o, a = _space(obs), _space(act)
        if o is None or o.kind != "box" or a is None or a.kind != "discrete":
            return None, [_unsupported(obs, act, ("env", "groups", name))]
        groups.append(GroupSpaces(name, tuple(agents), o, a))
    if env.state == "concat":
        state: tuple[int, ...] | None = (sum(math.prod(g.observation.shape) * g.rows for g in groups),)
    else:
        state = got.state
    limit = env.max_episode_steps or got.max_cycles
    agents = tuple(a for g in groups for a in g.agents)
    first = groups[0]
    several = tuple(groups) if len(groups) > 1 else ()  # one group: one batch, as without `groups`
    return EnvSpaces(first.observation, first.action, limit, agents=agents, state=state, groups=several), []
