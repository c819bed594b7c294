"""``rlgen init NAME --algo mappo|ippo --env PETTINGZOO_ENV``: a starting spec for many agents.

``--env`` names a PettingZoo ``ParallelEnv``: an MPE name such as ``simple_spread_v3`` (short
for ``mpe2.simple_spread_v3``), a module whose ``parallel_env()`` makes it, or a factory
``"pkg.module:callable"``. Its agents and spaces are read as ``validate`` reads them (in a
limited child process, :func:`rlgen.dsl.agents.read_agent_spaces`, never importing
TensorFlow); every agent must share one Box observation space and one Discrete action space,
since rlgen folds the agents into one batch. The settings are the reference MAPPO's
(marlbenchmark/on-policy) as the shipped examples ``mappo-simple-spread`` and
``ippo-simple-spread`` write them: for ``mpe2.simple_spread_v3`` its env arguments too; for
any other env the same env copies and rollout length, said to be simple_spread's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .scaffold_common import ScaffoldError, flow

#: Algorithms for PettingZoo envs (and only for them).
AGENT_ALGOS = ("mappo", "ippo")

#: MPE's envs by their bare names, as PettingZoo's docs call them: ``simple_spread_v3``.
_MPE_NAME = re.compile(r"simple(_[a-z]+)*_v\d+")
#: A module path, optionally with ``:attribute``: what ``env.pettingzoo`` takes.
_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?")


@dataclass(frozen=True)
class Reference:
    """The reference MAPPO's settings for one env; ``script`` is where they are written."""

    kwargs: dict[str, Any]
    kwargs_note: str  # the comment beside them
    script: str
    num_envs: int = 128  # n_rollout_threads
    steps: int = 25  # episode_length: the rollout is one whole episode
    total_steps: int = 2_000_000  # the reference runs 20M; the examples 2M
    time_limit_terminal: bool = True  # the reference stores a time limit as a termination


#: The envs whose reference settings rlgen writes, by ``env.pettingzoo``.
REFERENCE = {
    "mpe2.simple_spread_v3": Reference(
        kwargs={"N": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False},
        kwargs_note="3 agents, 3 landmarks, episode_length 25, discrete actions",
        script="train_mpe_spread.sh",
    ),
}
#: Any other PettingZoo env: simple_spread's copies and rollout length, no env arguments.
OTHER = Reference(kwargs={}, kwargs_note="", script="", time_limit_terminal=False)


def pettingzoo_ref(env: str) -> str | None:
    """What ``env.pettingzoo`` is for ``--env``, or None where it names a gymnasium env."""
    if _MPE_NAME.fullmatch(env):
        return f"mpe2.{env}"
    if not _REF.fullmatch(env) or not ("." in env or ":" in env):
        return None  # CartPole-v1, ALE/Pong-v5, ...
    import gymnasium as gym

    return None if env in gym.registry else env


@dataclass(frozen=True)
class AgentFacts:
    ref: str
    agents: tuple[str, ...]
    obs_size: int
    actions: int


def agent_facts(ref: str, kwargs: dict[str, Any]) -> AgentFacts:
    """The env's agents and spaces, as validate reads them; refused unless all agents share one
    Box observation space and one Discrete action space."""
    from rlgen.dsl.agents import ProbeError, read_agent_spaces

    try:
        got = read_agent_spaces(ref, kwargs, None)
    except ProbeError as exc:
        raise ScaffoldError(f"cannot make the PettingZoo env '{ref}': {exc}") from None
    if not got.agents:
        raise ScaffoldError(f"the PettingZoo env '{ref}' has no agents")
    obs, act = got.observations[0], got.actions[0]
    for agent, o, a in zip(got.agents, got.observations, got.actions, strict=True):
        if (o, a) != (obs, act):
            raise ScaffoldError(
                f"the agents of '{ref}' have different spaces ({got.agents[0]}: {_space(obs)}, {_space(act)}; "
                f"{agent}: {_space(o)}, {_space(a)}): groups of agents with different spaces are not supported "
                "yet; use an env whose agents share their spaces, e.g. simple_spread_v3"
            )
    if set(obs) - {"shape", "low", "high"} or len(obs.get("shape", ())) != 1 or set(act) != {"n"}:
        raise ScaffoldError(
            f"the agents of '{ref}' observe {_space(obs)} and act in {_space(act)}; rlgen's multi-agent "
            "envs need flat Box observations and Discrete actions (for MPE: continuous_actions false)"
        )
    return AgentFacts(ref, got.agents, int(obs["shape"][0]), int(act["n"]))


def _space(data: dict[str, Any]) -> str:
    if "n" in data:
        return f"Discrete({data['n']})"
    if "shape" in data:
        return f"Box{tuple(data['shape'])}"
    return str(data.get("unsupported", data))


def render_agents(name: str, algo: str, env: str, ref: str | None, recurrent: bool = False) -> str:
    """The spec's text for MAPPO or IPPO on a PettingZoo env (not yet validated); ``recurrent``:
    GRU networks, and rollouts of one episode and its reset row (``steps + 1`` rows)."""
    from rlgen.codegen.render import environment

    if algo not in AGENT_ALGOS:
        raise ScaffoldError(f"'{env}' is a PettingZoo env (many agents); rlgen init writes --algo mappo or ippo for it")
    if ref is None:
        raise ScaffoldError(
            f"{algo.upper()} needs a PettingZoo env: --env simple_spread_v3, a module such as "
            f"mpe2.simple_spread_v3, or a factory pkg.module:callable; '{env}' is a gymnasium env: use --algo ppo"
        )
    s = REFERENCE.get(ref, OTHER)
    facts = agent_facts(ref, s.kwargs)
    jinja = environment()
    jinja.filters["flow"] = flow
    rows = s.steps + 1 if recurrent else s.steps
    per_iteration = rows * s.num_envs
    total = -(-s.total_steps // per_iteration) * per_iteration
    return jinja.get_template("init_agents.rl.yaml.j2").render(
        name=name,
        algo=algo,
        env=facts,
        s=s,
        recurrent=recurrent,
        rows=rows,
        known=ref in REFERENCE,
        total_steps=total,
        iterations=total // per_iteration,
    )
