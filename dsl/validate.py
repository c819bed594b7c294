"""``validate``: text → data → schema → Spec → semantic checks → diagnostics (all of them)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgen.dsl.checks import Context, run_checks
from rlgen.dsl.dataflow import Dataflow, analyze
from rlgen.dsl.diagnostics import Diagnostic, has_errors
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.findings import Finding
from rlgen.dsl.overrides import Overrides, Setting, apply_overrides, flagged
from rlgen.dsl.schema import check_schema, integral
from rlgen.dsl.spec import Spec
from rlgen.dsl.specbuild import build_spec
from rlgen.dsl.specfile import STDIN, read_spec
from rlgen.dsl.yamlload import SourceMap, YamlError, load_yaml

#: Extra checks run after the language's own (the deploy checks of rlgen.codegen plug in here).
ExtraCheck = Callable[[Spec, Dataflow], Iterator[Finding]]


@dataclass
class Result:
    """The outcome of validating one file."""

    file: str
    text: str = ""
    spec: Spec | None = None
    flow: Dataflow | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    overrides: tuple[str, ...] = ()  # the command line's changes to the file, as flags
    settings: tuple[str, ...] = ()  # those of them that change more than the deployment
    document: Any = None  # the loaded document with the overrides written in

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    @property
    def sha256(self) -> str:
        """Of the text, and of the settings when there are any (the same file builds otherwise)."""
        return hashlib.sha256("\n".join([self.text, *self.settings]).encode("utf-8")).hexdigest()


def locate(f: Finding, smap: SourceMap) -> Diagnostic:
    """Place a finding in the file: line and column of its path (or of a part of a call string)."""
    span = smap.span(f.path, key=f.key)
    line, col = (span.line, span.column) if span else (1, 1)
    if span and f.offset is not None and span.line == span.end_line:
        col = span.column + f.offset + (1 if span.quoted else 0)
    return Diagnostic(f.code, f.severity, f.message, smap.file, line, col, f.path, f.hint, f.length)


def validate_text(
    text: str,
    file: str = "<string>",
    *,
    extra_checks: Iterable[ExtraCheck] = (),
    policy: str | None = None,
    workers: int | None = None,
    hosts: Iterable[str] | None = None,
    settings: Sequence[Setting] = (),
    min_workers: Callable[[str], int] | None = None,
    devices: str | dict[str, str] | None = None,
) -> Result:
    """Validate a spec given as text, with the command line's overrides (rlgen.dsl.overrides);
    never raises for bad input."""
    result = Result(file, text)
    try:
        data, smap = load_yaml(text, file)
    except YamlError as exc:
        result.diagnostics = exc.diagnostics
        return result
    overrides = Overrides(policy, workers, tuple(hosts) if hosts is not None else None, tuple(settings), devices)
    result.overrides = tuple(overrides.record())
    result.settings = tuple(s.flag for s in overrides.settings)
    return _validate_data(result, data, smap, tuple(extra_checks), overrides, min_workers)


def _place(f: Finding, overrides: Overrides, smap: SourceMap) -> Diagnostic:
    """A finding at its line of the file, or, about a value the command line gave, at that
    flag (no line: the file does not hold the value)."""
    given = flagged(f, overrides)
    if given is None:
        return locate(f, smap)
    return Diagnostic(given.code, given.severity, given.message, smap.file, 0, 0, given.path, given.hint)


def validate_file(path: str | Path, **kw) -> Result:
    """Validate a spec file (``-``: standard input, named ``<stdin>``). I/O errors, and paths
    that are neither regular files nor pipes, raise :class:`OSError` (the CLI's exit 2)."""
    name = STDIN if str(path) == "-" else str(path)
    try:
        text = read_spec(path)
    except YamlError as exc:
        return Result(name, exc.text, diagnostics=exc.diagnostics)
    return validate_text(text, name, **kw)


def _validate_data(result, data, smap, extra_checks, overrides: Overrides, min_workers) -> Result:
    data, misfits = apply_overrides(data, overrides, min_workers)
    result.document = data
    findings = check_schema(data)
    if not findings:
        spec = build_spec(integral(data))
        flow = analyze(spec)
        spaces, env_findings = resolve_spaces(spec.env)
        findings = env_findings + run_checks(Context(spec, flow, spaces))
        for extra in extra_checks:
            findings.extend(extra(spec, flow))
        result.spec, result.flow = spec, flow
    diags = [_place(f, overrides, smap) for f in findings]
    diags += [Diagnostic(f.code, f.severity, f.message, smap.file, 0, 0, f.path, f.hint) for f in misfits]
    result.diagnostics = sorted(diags, key=lambda d: (d.line, d.column, d.code))
    if not result.ok:
        result.spec = None
    return result
