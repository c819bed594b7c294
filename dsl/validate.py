"""``validate``: text → data → schema → Spec → semantic checks → diagnostics (all of them)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rlgen.dsl.checks import Context, run_checks
from rlgen.dsl.dataflow import Dataflow, analyze
from rlgen.dsl.diagnostics import Diagnostic, has_errors
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.findings import Finding
from rlgen.dsl.schema import check_schema
from rlgen.dsl.spec import Deploy, Spec, build_spec
from rlgen.dsl.yamlload import SourceMap, YamlError, load_file, load_yaml

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


def apply_overrides(
    spec: Spec,
    policy: str | None,
    workers: int | None,
    hosts: Iterable[str] | None,
    min_workers: Callable[[str], int] | None = None,
) -> Spec:
    """The spec with command-line deploy overrides. Without ``workers``, a policy other than the
    spec's gets ``min_workers(policy)`` if that rule is given, else the spec's worker count."""
    dep = spec.deploy
    new_policy = policy or dep.policy
    if workers is None:
        workers = min_workers(new_policy) if min_workers and new_policy != dep.policy else dep.workers
    hosts = tuple(hosts) if hosts is not None else dep.hosts
    return dataclasses.replace(spec, deploy=Deploy(new_policy, workers, hosts, dep.lag))


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
    return _validate_data(result, data, smap, extra_checks, policy, workers, hosts, min_workers)


def validate_file(path: str | Path, **kw) -> Result:
    """Validate a spec file. I/O errors raise :class:`OSError` (the CLI's exit 2)."""
    try:
        data, smap = load_file(path)
    except YamlError as exc:
        return Result(str(path), Path(path).read_text("utf-8", "replace"), diagnostics=exc.diagnostics)
    result = Result(str(path), smap.text)
    return _validate_data(result, data, smap, kw.pop("extra_checks", ()), **kw)


def _validate_data(result, data, smap, extra_checks, policy=None, workers=None, hosts=None, min_workers=None) -> Result:
    findings = check_schema(data)
    if not findings:
        spec = apply_overrides(build_spec(data), policy, workers, hosts, min_workers)
        flow = analyze(spec)
        spaces, env_findings = resolve_spaces(spec.env)
        findings = env_findings + run_checks(Context(spec, flow, spaces))
        for extra in extra_checks:
            findings.extend(extra(spec, flow))
        result.spec, result.flow = spec, flow
    diags = [locate(f, smap) for f in findings]
    result.diagnostics = sorted(diags, key=lambda d: (d.line, d.column, d.code))
    if not result.ok:
        result.spec = None
    return result
