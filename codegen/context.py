"""What every pass of :mod:`rlgen.codegen.passes` and the lowering read besides the FDG, and the
names both derive from it: the :class:`Context`, fragment names, the actors' lag."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rlgen.codegen.ir import FDG
from rlgen.codegen.policies import DistributionPolicy
from rlgen.dsl.catalog import EnvSpaces
from rlgen.dsl.devices import SIDE_OF_ROLE, by_side
from rlgen.dsl.resolved import resolved
from rlgen.dsl.spec import Spec


class CutError(ValueError):
    """The policy cannot cut this spec's loop (message says which partition is missing)."""


@dataclass(frozen=True)
class Context:
    """What the passes read besides the FDG: the spec, the env's spaces and the policy."""

    spec: Spec
    spaces: EnvSpaces
    policy: DistributionPolicy
    hosts: tuple[str, ...] = ()

    @cached_property
    def resolved(self) -> dict[str, Any]:
        """The spec's resolved form (:func:`rlgen.dsl.resolved.resolved`), made once a build."""
        return resolved(self.spec)


Pass = Callable[[FDG, Context], FDG]


def fragment_name(role: str, kind: str) -> str:
    """``agent`` / ``env`` for the single process, ``<role>`` / ``<role>_env`` otherwise."""
    if role == "main":
        return "agent" if kind == "compute" else "env"
    if kind == "env":
        return "env_worker" if role == "env" else f"{role}_env"
    return role


def lag_of(ctx: Context) -> int:
    """How many updates old the weights an actor acts with may be (``deploy.lag``, else the policy's)."""
    return ctx.spec.deploy.lag if ctx.spec.deploy.lag is not None else ctx.policy.lag


def fragment_device(ctx: Context, role: str, kind: str) -> tuple[str, str] | tuple[None, None]:
    """``(device, side)`` of a compute fragment from ``deploy.devices`` (rlgen.dsl.devices), by
    its role's side; ``(None, None)`` for a host fragment (always on the CPU) or where the spec
    names no devices."""
    sides = by_side(ctx.spec.deploy.devices)
    if sides is None or kind != "compute":
        return None, None
    side = SIDE_OF_ROLE[ctx.policy.role(role).side]
    return sides[side], side


def fragment_devices(fdg: FDG, ctx: Context) -> dict[str, str] | None:
    """Fragment → where it runs (host fragments ``cpu``), as ``rlgen graph`` and ``--dry-run``
    show it; None where the spec names no devices."""
    if ctx.spec.deploy.devices is None:
        return None
    return {f.name: fragment_device(ctx, f.role, f.kind)[0] or "cpu" for f in fdg.fragments}
