"""Gymnasium wrappers named in a spec (``env.wrappers``): what an entry means, and whether it fits.

An entry is a wrapper's name, or a one-key mapping from the name to its keyword
arguments::

    wrappers:
      - TimeAwareObservation
      - FrameStackObservation: {stack_size: 4}
      - "my_pkg.wrappers:AddNoise": {scale: 0.1}

A plain name is a class of ``gymnasium.wrappers`` (single-env wrappers only); a
``"pkg.module:callable"`` is the user's own, called as ``callable(env, **kwargs)``, and
like every custom part it is imported by ``rlgen run`` only. Wrappers apply to each env
in order, after the time limit, and what they return is what the loop sees (the
observation space, the rewards and so the reported returns) and what evaluation runs.

Some gymnasium wrappers do what rlgen does itself, or take a Python function that a spec
cannot hold: :data:`REFUSED` says what to use instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_FUNCTION = (
    'it takes a Python function, which a spec cannot hold: write a wrapper class and name it as "pkg.module:Class"'
)
#: gymnasium wrappers a spec may not name, and what to do instead.
REFUSED = {
    "TimeLimit": "set `env.max_episode_steps`",
    "NormalizeObservation": "use `env.normalize`: its statistics are checkpointed and exported with the policy",
    "NormalizeReward": "use `env.normalize`: its statistics are checkpointed and exported with the policy",
    "Autoreset": "rlgen's vector env resets finished episodes itself",
    "RecordEpisodeStatistics": "rlgen records episode returns and lengths itself",
    "RecordVideo": "record a trained policy with `rlgen eval RUN_DIR --video DIR`",
    "HumanRendering": "training draws nothing; record a trained policy with `rlgen eval RUN_DIR --video DIR`",
    "RenderCollection": "record a trained policy with `rlgen eval RUN_DIR --video DIR`",
    "OrderEnforcing": "gymnasium.make applies it already",
    "PassiveEnvChecker": "gymnasium.make applies it already",
    "TransformObservation": _FUNCTION,
    "TransformAction": _FUNCTION,
    "TransformReward": _FUNCTION,
}


@dataclass(frozen=True)
class Wrapper:
    """One entry of ``env.wrappers``: a gymnasium wrapper's name or a ``"pkg.module:callable"``."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def custom(self) -> bool:
        return ":" in self.name

    def as_data(self) -> dict[str, Any]:
        """Plain data for ``plan.json`` and the generated code."""
        return {"name": self.name, "kwargs": dict(self.kwargs)}


def parse(raw: Sequence[Any]) -> tuple[Wrapper, ...]:
    """The entries of a spec's ``env.wrappers`` (already checked by the JSON Schema)."""
    out = []
    for item in raw:
        if isinstance(item, str):
            out.append(Wrapper(item))
        else:
            ((name, kwargs),) = item.items()
            out.append(Wrapper(name, dict(kwargs or {})))
    return tuple(out)


def from_data(items: Sequence[Mapping[str, Any]]) -> tuple[Wrapper, ...]:
    """The inverse of :meth:`Wrapper.as_data`."""
    return tuple(Wrapper(i["name"], dict(i.get("kwargs") or {})) for i in items)


def gymnasium_wrappers() -> dict[str, type]:
    """The single-env wrapper classes of ``gymnasium.wrappers`` a spec may name."""
    import gymnasium
    import gymnasium.wrappers as module

    return {
        name: obj
        for name in dir(module)
        if name not in REFUSED and isinstance(obj := getattr(module, name), type) and issubclass(obj, gymnasium.Wrapper)
    }


def problem(wrapper: Wrapper) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for a gymnasium wrapper that cannot apply as written;
    None when it can (a custom one is not imported here, so it always can)."""
    if wrapper.custom:
        return None
    from rlgen.dsl.diagnostics import did_you_mean, quote_list

    if wrapper.name in REFUSED:
        return f"`{wrapper.name}` cannot be used as an env wrapper here", REFUSED[wrapper.name]
    known = gymnasium_wrappers()
    cls = known.get(wrapper.name)
    if cls is None:
        return (
            f"`{wrapper.name}` is not a gymnasium wrapper{did_you_mean(wrapper.name, list(known))}",
            'name a class of gymnasium.wrappers, e.g. FrameStackObservation, or your own as "pkg.module:Class"',
        )
    signature = inspect.signature(cls.__init__)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    takes = [p.name for p in list(signature.parameters.values())[2:] if p.kind in named]  # after self, env
    hint = f"it takes: {', '.join(takes) or 'no arguments'}"
    unknown = [k for k in wrapper.kwargs if k not in takes]
    if unknown:
        return f"`{wrapper.name}` takes no argument {quote_list(unknown)}", hint
    try:
        signature.bind(None, None, **wrapper.kwargs)
    except TypeError as exc:
        return f"`{wrapper.name}` cannot take these arguments: {exc}", hint
    return None


def wrapper_class(wrapper: Wrapper) -> type:
    """The ``gymnasium.wrappers`` class a non-custom entry names (one :func:`problem` accepts)."""
    return gymnasium_wrappers()[wrapper.name]


__all__ = ["REFUSED", "Wrapper", "from_data", "gymnasium_wrappers", "parse", "problem", "wrapper_class"]
