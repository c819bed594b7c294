"""``validate``: text → data → schema → Spec → semantic checks → diagnostics (all of them)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgen.dsl.checks import Context, run_checks
from rlgen.dsl.dataflow import Dataflow, analyze
from rlgen.dsl.diagnostics import Diagnostic, has_errors
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.findings import Finding
from rlgen.dsl.schema import check_schema, integral
from rlgen.dsl.spec import Spec, build_spec
from rlgen.dsl.yamlload import SourceMap, YamlError, load_yaml, read_spec

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

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def locate(f: Finding, smap: SourceMap) -> Diagnostic:
    """Place a finding in the file: line and column of its path (or of a part of a call string)."""
    span = smap.span(f.path, key=f.key)
    line, col = (span.line, span.column) if span else (1, 1)
    if span and f.offset is not None and span.line == span.end_line:
        col = span.column + f.offset + (1 if span.quoted else 0)
    return Diagnostic(f.code, f.severity, f.message, smap.file, line, col, f.path, f.hint, f.length)


@dataclass(frozen=True)
class Overrides:
    """Deploy settings given on the command line (``--policy``, ``--workers``, ``--hosts``);
    ``None`` keeps the spec's own."""

    policy: str | None = None
    workers: int | None = None
    hosts: tuple[str, ...] | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def apply_overrides(data: Any, overrides: Overrides, min_workers: Callable[[str], int] | None = None) -> Any:
    """The document with command-line deploy overrides written into its ``deploy`` section,
    before the schema checks it (so the same bounds apply to both). Without ``workers``, a
    policy other than the spec's gets ``min_workers(policy)`` if that rule is given, else the
    spec's worker count."""
    if not overrides.given() or not isinstance(data, dict):
        return data
    dep = data.get("deploy")
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
    return {**data, "deploy": dep}


def _flagged(f: Finding, overrides: Overrides) -> Finding:
    """Say which command-line flag gave the value a deploy finding is about."""
    path = f.path
    if len(path) >= 2 and path[0] == "deploy" and path[1] in overrides.given():
        return dataclasses.replace(f, message=f"{f.message} (given by --{path[1]})")
    return f


def validate_text(
    text: str,
    file: str = "<string>",
    *,
    extra_checks: Iterable[ExtraCheck] = (),
    policy: str | None = None,
    workers: int | None = None,
    hosts: Iterable[str] | None = None,
    min_workers: Callable[[str], int] | None = None,
) -> Result:
    """Validate a spec given as text; never raises for bad input."""
    result = Result(file, text)
    try:
        data, smap = load_yaml(text, file)
    except YamlError as exc:
        result.diagnostics = exc.diagnostics
        return result
    overrides = Overrides(policy, workers, tuple(hosts) if hosts is not None else None)
    return _validate_data(result, data, smap, tuple(extra_checks), overrides, min_workers)


def validate_file(path: str | Path, **kw) -> Result:
    """Validate a spec file. I/O errors, and paths that are not regular files, raise
    :class:`OSError` (the CLI's exit 2)."""
    try:
        text = read_spec(path)
    except YamlError as exc:
        return Result(str(path), exc.text, diagnostics=exc.diagnostics)
    return validate_text(text, str(path), **kw)


def _validate_data(result, data, smap, extra_checks, overrides: Overrides, min_workers) -> Result:
    data = apply_overrides(data, overrides, min_workers)
    findings = check_schema(data)
    if not findings:
        spec = build_spec(integral(data))
        flow = analyze(spec)
        spaces, env_findings = resolve_spaces(spec.env)
        findings = env_findings + run_checks(Context(spec, flow, spaces))
        for extra in extra_checks:
            findings.extend(extra(spec, flow))
        result.spec, result.flow = spec, flow
    diags = [locate(_flagged(f, overrides), smap) for f in findings]
    result.diagnostics = sorted(diags, key=lambda d: (d.line, d.column, d.code))
    if not result.ok:
        result.spec = None
    return result
