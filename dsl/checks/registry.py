"""The registry of semantic checks: the :class:`Context` every check sees, :func:`check` to
register one, and :func:`run_checks` to run them in registration order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rlgen.dsl.catalog import EnvSpaces
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.findings import Finding
from rlgen.dsl.spec import Spec


@dataclass
class Context:
    """What every check sees: the spec, its dataflow, and the env's spaces (if known)."""

    spec: Spec
    flow: Dataflow
    spaces: EnvSpaces | None


CheckFn = Callable[[Context], Iterator[Finding]]
CHECKS: list[CheckFn] = []


def check(fn: CheckFn) -> CheckFn:
    """Register a check."""
    CHECKS.append(fn)
    return fn


def run_checks(ctx: Context) -> list[Finding]:
    findings: list[Finding] = list(ctx.flow.findings)
    for fn in CHECKS:
        findings.extend(fn(ctx))
    return findings
