"""The search space of ``rlgen tune``: spec paths and the ranges their values are sampled from.

A small YAML file (docs/tuning.md)::

    objective: eval_mean_return      # or mean_return; maximised
    space:
      components.learner.lr: {low: 1.0e-4, high: 3.0e-3, log: true}
      components.learner.epochs: {choices: [5, 10, 20]}
      env.num_envs: {low: 8, high: 32, step: 8}   # integers: both bounds are

It is checked as a spec is: YAML, the JSON Schema ``schemas/rlgen-tune.schema.json``,
the ranges themselves, then the spec with each bound and each choice written in (as
``--set`` writes it), so that no trial meets a value the spec refuses. Errors point at
the line of the space file. Never imports Optuna.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgen.dsl.diagnostics import Diagnostic, Severity, has_errors
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.overrides import OverrideError, Setting, parse_path
from rlgen.dsl.schema import check_schema
from rlgen.dsl.spec import Spec
from rlgen.dsl.specfile import read_spec
from rlgen.dsl.validate import Result, locate
from rlgen.dsl.yamlload import YamlError, load_yaml

SCHEMA_FILE = "rlgen-tune.schema.json"
OBJECTIVES = ("eval_mean_return", "mean_return")


@dataclass(frozen=True)
class Param:
    """One tuned value: its spec path as ``--set`` takes it, and a range or choices."""

    name: str
    path: tuple[str | int, ...]
    low: float = 0
    high: float = 0
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    @property
    def integer(self) -> bool:
        """A range of integers: both bounds (and the step, if any) are."""
        return not self.choices and all(isinstance(v, int) for v in (self.low, self.high, self.step) if v is not None)

    def setting(self, value: Any) -> Setting:
        """``--set NAME=VALUE`` for a sampled value (VALUE as JSON, which YAML reads back as it was)."""
        return Setting(self.path, value, f"--set {self.name}={json.dumps(value)}")


@dataclass(frozen=True)
class Space:
    """A checked search space."""

    objective: str
    params: tuple[Param, ...]
    prune: bool = True
    startup_trials: int = 5
    warmup_steps: int | None = None  # None: a quarter of the spec's train.total_steps


@dataclass
class Checked:
    """The outcome of checking a space file (as :class:`rlgen.dsl.validate.Result` for a spec)."""

    file: str
    text: str = ""
    space: Space | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def check_space(path: str | Path, spec: Spec, validate: Callable[[Setting], Result]) -> Checked:
    """Read and check a space file for ``spec`` (valid, with the command line's overrides);
    ``validate(setting)`` validates the spec with one more setting. I/O errors raise
    :class:`OSError`, as for a spec."""
    try:
        text = read_spec(path)
    except YamlError as exc:
        return Checked(str(path), exc.text, diagnostics=exc.diagnostics)
    try:
        data, smap = load_yaml(text, str(path))
    except YamlError as exc:
        return Checked(str(path), text, diagnostics=exc.diagnostics)
    checked = Checked(str(path), text)
    findings = check_schema(data, SCHEMA_FILE)
    if not findings:
        space, findings = _space(data, spec)
        wrong = {f.path[1] for f in findings if f.path[:1] == ("space",)}
        findings += [f for p in space.params if p.name not in wrong for f in _refused(p, validate)]
        checked.space = None if findings else space
    checked.diagnostics = sorted((locate(f, smap) for f in findings), key=lambda d: (d.line, d.column, d.code))
    return checked


def _space(data: dict[str, Any], spec: Spec) -> tuple[Space, list[Finding]]:
    """The space of a schema-valid document, and what is wrong with its ranges."""
    findings = []
    objective = data.get("objective", OBJECTIVES[0] if spec.train.eval.every else OBJECTIVES[1])
    if objective == "eval_mean_return" and not spec.train.eval.every:
        findings.append(
            error(
                "E807",
                ("objective",),
                "the spec does not evaluate its policy during training, so a trial has no eval_mean_return",
                "set train.eval.every in the spec (or --set train.eval.every=N), or write objective: mean_return",
            )
        )
    params = []
    for name, entry in data["space"].items():
        try:
            param = Param(name, parse_path(name), **{k: tuple(v) if k == "choices" else v for k, v in entry.items()})
        except OverrideError as exc:
            findings.append(error("E805", ("space", name), str(exc), "write a path as --set takes it", key=True))
            continue
        findings += _range_findings(param)
        inside = next((p.name for p in params if param.path[: len(p.path)] == p.path[: len(param.path)]), None)
        if inside is not None:
            findings.append(
                error(
                    "E805",
                    ("space", name),
                    f"'{name}' overlaps '{inside}', which is tuned too",
                    "tune one of them",
                    key=True,
                )
            )
        params.append(param)
    prune = data.get("prune", True)
    options = prune if isinstance(prune, dict) else {}  # startup_trials, warmup_steps
    return Space(objective, tuple(params), prune is not False, **options), findings


def _range_findings(p: Param) -> Iterator[Finding]:
    at = ("space", p.name)
    if p.choices:
        return
    if p.low >= p.high:
        yield error(
            "E801", (*at, "high"), f"high {p.high} is not greater than low {p.low}", "write low < high (or choices)"
        )
    elif p.log and p.low <= 0:
        yield error("E802", (*at, "low"), f"a log range needs low > 0, not {p.low}", "raise low, or drop log: true")
    elif p.step is not None and p.log:
        yield error("E803", (*at, "step"), "a range takes step or log, not both", "remove one of them")
    elif p.step is not None and not math.isclose((p.high - p.low) / p.step, round((p.high - p.low) / p.step)):
        fit = p.low + math.floor((p.high - p.low) / p.step) * p.step
        yield error(
            "E803",
            (*at, "high"),
            f"high {p.high} is not low plus a multiple of step {p.step}",
            f"write high: {fit:g} (or another low + k * step)",
        )


def _probes(p: Param) -> Iterator[tuple[tuple, Any, str]]:
    """The values of ``p`` checked against the spec: (where in the space file, value, what it is)."""
    at = ("space", p.name)
    if p.choices:
        for i, value in enumerate(p.choices):
            yield (*at, "choices", i), value, f"choice {i + 1}"
        return
    yield (*at, "low"), p.low, "low"
    yield (*at, "high"), p.high, "high"
    if not p.integer and p.step is None:  # a spec that takes integers here takes the float bounds 5.0 and 20.0
        yield at, math.nextafter(p.low, p.high), "a value between the bounds"


def _refused(p: Param, validate: Callable[[Setting], Result]) -> Iterator[Finding]:
    """The first value of ``p`` the spec refuses, as a finding at that value in the space file."""
    for where, value, what in _probes(p):
        setting = p.setting(value)
        errors = [d for d in validate(setting).diagnostics if d.severity is Severity.ERROR]
        if not errors:
            continue
        d = errors[0]
        why = d.message.removesuffix(f" (given by {setting.flag})").removeprefix(f"{setting.flag}: ")
        if d.line:
            why += f" ({d.file}:{d.line})"
        if d.code in ("E109", "E202"):  # no such path in the spec, whatever the value
            yield error("E805", where[:2], f"'{p.name}' is not a path of the spec: {why}", d.hint, key=True)
        elif where == ("space", p.name):
            yield error(
                "E806",
                where,
                f"the spec refuses {p.name} = {value} ({what}): {why}",
                "if it takes integers here, write both bounds as integers",
                key=True,
            )
        else:
            hint = d.hint or "keep the range within what the spec accepts"
            yield error("E806", where, f"the spec refuses {p.name} = {json.dumps(value)} ({what}): {why}", hint)
        return
