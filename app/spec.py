"""A spec as every command takes it: the file, the deployment overrides a command gives
(:class:`Deployment`), and :func:`validated`, the one way a command validates before it works."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import InvalidSpec, UsageError


@dataclass(frozen=True)
class Deployment:
    """A command's overrides of the spec: where it runs (``policy``, ``workers``, ``hosts``) and
    any value (``settings``: ``--seed``, ``--set``, as :mod:`rlgen.dsl.overrides` parses them).
    The algorithm part of the spec never changes."""

    policy: str | None = None
    workers: int | None = None
    hosts: tuple[str, ...] | None = None
    settings: tuple[Any, ...] = ()
    devices: str | dict[str, str] | None = None  # --devices (rlgen.dsl.devices.parse_flag)

    def overrides(self) -> dict[str, Any]:
        """As keyword arguments of :func:`rlgen.api.validate_file`."""
        hosts = list(self.hosts) if self.hosts is not None else None
        out = {"policy": self.policy, "workers": self.workers, "hosts": hosts, "settings": self.settings}
        return out if self.devices is None else {**out, "devices": self.devices}

    def with_settings(self, *more: Any) -> Deployment:
        return replace(self, settings=(*self.settings, *more))

    def placed(self, policy: str, workers: int, devices: dict[str, str] | None = None) -> Deployment:
        """Under ``policy`` on ``workers`` (and with ``devices``, placed so; else as given)."""
        if devices is not None:
            return replace(self, policy=policy, workers=workers, devices=devices)
        return replace(self, policy=policy, workers=workers)

    def setting_argv(self) -> list[str]:
        """``--seed``/``--set`` as given, for the ``rlgen`` commands this one starts."""
        return [word for s in self.settings for word in s.flag.split(" ", 1)]

    def argv(self) -> list[str]:
        """Every override as ``rlgen`` flags (a tune trial is an ``rlgen run`` of the same spec)."""
        out = [] if self.policy is None else ["--policy", self.policy]
        out += [] if self.workers is None else ["--workers", str(self.workers)]
        out += ["--hosts", ",".join(self.hosts)] if self.hosts else []
        if self.devices is not None:
            from rlgen.dsl.devices import flag_text

            out += ["--devices", flag_text(self.devices)]
        return out + self.setting_argv()

    @property
    def given(self) -> bool:
        return bool(self.policy or self.workers or self.hosts or self.settings or self.devices is not None)


def validated(spec: str | Path, deployment: Deployment = Deployment()) -> Any:
    """The spec validated with the overrides (an :class:`rlgen.dsl.validate.Result` that is ok);
    :class:`InvalidSpec` with its diagnostics, or :class:`UsageError` when it cannot be read."""
    from rlgen.api import validate_file

    try:
        result = validate_file(spec, **deployment.overrides())
    except OSError as exc:
        raise UsageError(f"cannot read {spec}: {exc.strerror or exc}") from None
    if not result.ok:
        raise InvalidSpec(result.diagnostics, {result.file: result.text})
    return result


def named_policy(result: Any, command: str) -> None:
    """``policy: auto`` names no cut to build or draw: :class:`UsageError` saying so."""
    from rlgen.codegen.policies import AUTO, POLICIES

    if result.spec.deploy.policy == AUTO:
        raise UsageError(
            f"policy 'auto' is chosen when training (`rlgen run SPEC --policy auto`); "
            f"give a named policy here: --policy {', '.join(POLICIES)}"
        )
