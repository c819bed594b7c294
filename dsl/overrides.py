"""Command-line overrides: a spec changed for one command without editing the file.

Two kinds, applied to the loaded document before the schema sees it, so an override is
checked exactly as the same value written in the file:

* deploy settings: ``--policy``, ``--workers``, ``--hosts`` (``--hostfile``), ``--devices``
  (written over the file's ``deploy.devices``, side by side: rlgen.dsl.devices.merge);
* any value: ``--set PATH=VALUE`` (``components.learner.lr=3e-4``; list items by index,
  ``networks.pi.hidden.0=128``; VALUE is YAML under the file's own rules) and ``--seed N``
  (``--set train.seed=N``).

A finding about a value an override gave points at the override, not at a line of the
file, and the build records the overrides next to the resolved spec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlgen.dsl.devices import flag_text, merge
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.yamlload import YamlError, load_yaml


class OverrideError(ValueError):
    """A ``--set`` that is not ``PATH=VALUE`` or whose VALUE is not valid YAML."""


@dataclass(frozen=True)
class Setting:
    """One ``--set PATH=VALUE``: the path as keys and list indexes, and the parsed value."""

    path: tuple[str | int, ...]
    value: Any
    flag: str  # as given (``--set PATH=VALUE``, ``--seed N``), for messages and the build's record


def parse_setting(text: str) -> Setting:
    """``PATH=VALUE`` → :class:`Setting`; raises :class:`OverrideError` saying what is wrong."""
    path_text, eq, value_text = text.partition("=")
    if not eq or not path_text.strip():
        raise OverrideError(f"'{text}' is not PATH=VALUE (e.g. components.learner.lr=3e-4)")
    path = parse_path(path_text.strip())
    try:
        value, _ = load_yaml(value_text, f"--set {text}")
    except YamlError as exc:
        raise OverrideError(f"--set {text}: {exc.diagnostics[0].message}") from None
    return Setting(path, value, f"--set {path_text.strip()}={value_text}")


def parse_path(text: str) -> tuple[str | int, ...]:
    """``networks.pi.hidden.0`` → ``("networks", "pi", "hidden", 0)`` (list items by index);
    raises :class:`OverrideError` for an empty part."""
    parts = text.split(".")
    if any(not p for p in parts):
        raise OverrideError(f"'{text}' has an empty part: write keys joined by dots, e.g. train.seed")
    return tuple(int(p) if p.isdigit() else p for p in parts)


def seed_setting(seed: int) -> Setting:
    """``--seed N``: the run's seed (``train.seed``)."""
    return Setting(("train", "seed"), seed, f"--seed {seed}")


@dataclass(frozen=True)
class Overrides:
    """What a command line changes; ``None`` (or no settings) keeps the spec's own."""

    policy: str | None = None
    workers: int | None = None
    hosts: tuple[str, ...] | None = None
    settings: tuple[Setting, ...] = ()
    devices: str | dict[str, str] | None = None  # rlgen.dsl.devices.parse_flag's

    def deploy(self) -> dict[str, Any]:
        """The deploy settings given (flag name → value)."""
        keys = ("policy", "workers", "hosts", "devices")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def record(self) -> list[str]:
        """The overrides as flags, in the order given (deploy first), for the build's record."""
        deploy = [
            f"--{k} {','.join(v) if isinstance(v, tuple) else flag_text(v) if k == 'devices' else v}"
            for k, v in self.deploy().items()
        ]
        return deploy + [s.flag for s in self.settings]


def apply_overrides(
    data: Any, overrides: Overrides, min_workers: Callable[[str], int] | None = None
) -> tuple[Any, list[Finding]]:
    """The document with the overrides written in, before the schema checks it (so the same
    bounds apply to both), and findings (E109, naming their flag) for settings whose path
    does not fit the document.

    Without ``workers``, a policy other than the spec's gets ``min_workers(policy)`` if that
    rule is given, else the spec's worker count."""
    if not isinstance(data, dict):
        return data, []
    if overrides.deploy():
        data = {**data, "deploy": _deploy(data.get("deploy"), overrides, min_workers)}
    findings = []
    for setting in overrides.settings:
        data, problem = _set(data, setting)
        if problem:
            findings.append(problem)
    return data, findings


def _deploy(dep: Any, overrides: Overrides, min_workers: Callable[[str], int] | None) -> dict[str, Any]:
    dep = dict(dep) if isinstance(dep, dict) else {}
    workers = overrides.workers
    if overrides.policy is not None:
        if workers is None and min_workers is not None and overrides.policy != dep.get("policy", "single"):
            workers = min_workers(overrides.policy)
        dep["policy"] = overrides.policy
    if workers is not None:
        dep["workers"] = workers
    if overrides.hosts is not None:
        dep["hosts"] = list(overrides.hosts)
    if overrides.devices is not None:
        dep["devices"] = merge(dep.get("devices"), overrides.devices)
    return dep


def _set(data: dict, setting: Setting) -> tuple[dict, Finding | None]:
    """``data`` with ``setting`` applied (copies along the path; the loaded document is not
    changed), or the finding that says where its path stops fitting."""

    def put(node: Any, depth: int) -> Any:
        key = setting.path[depth]
        last = depth == len(setting.path) - 1
        if isinstance(node, dict):
            child = node.get(str(key))
            return {**node, str(key): setting.value if last else put(child if child is not None else {}, depth + 1)}
        if isinstance(node, list) and isinstance(key, int) and key < len(node):
            return [*node[:key], setting.value if last else put(node[key], depth + 1), *node[key + 1 :]]
        where = ".".join(map(str, setting.path[:depth])) or "the document"
        what = f"a list of {len(node)} items" if isinstance(node, list) else _KINDS.get(type(node), "a value")
        raise _Misfit(
            setting.path[:depth],
            f"{setting.flag}: {where} is {what}, which has no '{key}'",
            "give the path of a key or list item the document has (list items by index, from 0)",
        )

    try:
        return put(data, 0), None
    except _Misfit as exc:
        return data, error("E109", *exc.args)


_KINDS = {bool: "true or false", int: "a number", float: "a number", str: "a string", type(None): "null"}


class _Misfit(Exception):
    pass


def given_by(f: Finding, overrides: Overrides) -> str | None:
    """The flag that gave the value ``f`` is about (None: the file did)."""
    path = tuple(map(str, f.path))
    for setting in reversed(overrides.settings):  # a later --set wins, as when applied
        if path[: len(setting.path)] == tuple(map(str, setting.path)):
            return setting.flag
    if len(f.path) >= 2 and f.path[0] == "deploy" and f.path[1] in overrides.deploy():
        return f"--{f.path[1]}"
    return None


def flagged(f: Finding, overrides: Overrides) -> Finding | None:
    """``f`` with the flag that gave its value named, or None when the file gave it."""
    flag = given_by(f, overrides)
    return None if flag is None else dataclasses.replace(f, message=f"{f.message} (given by {flag})")


def settings_of(seed: int | None, sets: Sequence[Setting] | None) -> tuple[Setting, ...]:
    """``--seed`` then the ``--set``s, as a command line gave them."""
    return ((seed_setting(seed),) if seed is not None else ()) + tuple(sets or ())
