"""Semantic checks: each is a generator of :class:`Finding`s over a :class:`Context`.

Checks are registered with :func:`check` in the modules imported at the bottom
of this file, and run in registration order by :func:`run_checks`. Every check's
docstring shows the smallest YAML it catches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rlgen.dsl.catalog import EnvSpaces
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.findings import Finding, error, warning  # noqa: F401  (re-exported for checks)
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


# Registration order is report order within a file (after sorting by position).
from rlgen.dsl.checks import names, spaces, partitions, train  # noqa: E402,F401,I001
