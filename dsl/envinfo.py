"""Finding an environment's spaces without TensorFlow: declared, known, or asked of gymnasium."""

from __future__ import annotations

import os

from rlgen.dsl.catalog import KNOWN_ENVS, EnvSpaces, Space
from rlgen.dsl.diagnostics import did_you_mean
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
        )
    return None


def resolve_spaces(env: EnvSpec) -> tuple[EnvSpaces | None, list[Finding]]:
    """The env's spaces and any finding about the env id (unknown id, cannot read spaces)."""
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
    if env.id in KNOWN_ENVS and not env.wrappers:
        known = KNOWN_ENVS[env.id]
        return EnvSpaces(obs or known.observation, act or known.action, known.max_episode_steps), []
    try:
        import gymnasium
        from gymnasium.envs.registration import registry
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return None, []
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
        made = gymnasium.make(env.id, **env.kwargs)
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
