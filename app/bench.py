"""``rlgen bench``: comparing distribution policies on one spec: run each, read its metrics,
print a table.

Each policy runs through ``rlgen run`` in a fresh process (so every row pays the same
start-up and no TensorFlow state leaks between rows); figures come from the run's
``metrics.jsonl``. The first iteration (tracing, warm-up) is left out of rates and
per-part times. Times per part are rank 0's (the learner, or the whole loop under
``single``) and, for policies with other ranks, theirs (actors, env workers, other
learners: the mean per rank).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlgen.runtime.clock import CATEGORIES as PARTS  # the parts a run times
from rlgen.runtime.metricslog import per_iteration

from . import child
from .errors import UsageError
from .spec import Deployment


@dataclass
class PolicyResult:
    policy: str
    workers: int
    ok: bool
    error: str = ""
    applies: bool = True  # False: the spec does not validate under this policy (error says why)
    iterations: int = 0
    env_steps: int = 0
    wall: float = 0.0
    steps_per_s: float = 0.0
    time_to_target: float | None = None
    steps_to_target: int | None = None
    final_return: float | None = None
    ms_per_iteration: dict[str, float] = field(default_factory=dict)  # rank 0's
    rest_ms_per_iteration: dict[str, float] = field(default_factory=dict)  # the other ranks', mean per rank


def speed_only(spec: Path, tmp: Path, checkpoint_every: int | None = None) -> Path:
    """A copy of ``spec`` in ``tmp`` with periodic evaluation and the return target off (and,
    with ``checkpoint_every``, checkpoints that often): for measuring speed and faults."""
    text = re.sub(r"eval: \{[^}]*\}", "eval: {every: 0}", spec.read_text())
    text = re.sub(r"stop: \{[^}]*\}", "stop: {}", text)
    if checkpoint_every is not None:
        text = re.sub(r"checkpoint: \{[^}]*\}", f"checkpoint: {{every: {checkpoint_every}, keep: 3}}", text)
    out = tmp / spec.name
    out.write_text(text)
    return out


def read_run(run_dir: Path, policy: str, workers: int, target: float | None, warmup: int = 1) -> PolicyResult:
    """The run's figures; rates and per-part times leave out the first ``warmup`` rows (the
    first iteration has a row of its own: it traces and compiles)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    if not rows:
        return PolicyResult(policy, workers, False, "no metrics written")
    warmup = min(warmup, len(rows) - 1)
    steady = rows[warmup:]
    span = steady[-1]["time"] - (rows[warmup - 1]["time"] if warmup else 0.0)
    steps = steady[-1]["env_steps"] - (rows[warmup - 1]["env_steps"] if warmup else 0)
    result = PolicyResult(
        policy,
        workers,
        True,
        iterations=rows[-1]["iteration"],
        env_steps=rows[-1]["env_steps"],
        wall=rows[-1]["time"],
        steps_per_s=steps / span if span > 0 else 0.0,
        final_return=rows[-1].get("mean_return"),
        ms_per_iteration={p: 1000 * per_iteration(steady, f"time_{p}") for p in PARTS},
    )
    if any(f"rest_time_{p}" in row for row in steady for p in PARTS):
        result.rest_ms_per_iteration = {p: 1000 * per_iteration(steady, f"rest_time_{p}") for p in PARTS}
    if target is not None:
        hit = next((r for r in rows if r.get("mean_return") is not None and r["mean_return"] >= target), None)
        if hit is not None:
            result.time_to_target, result.steps_to_target = hit["time"], hit["env_steps"]
    return result


def run_policy(
    spec: Path,
    policy: str,
    workers: int,
    iterations: int | None,
    run_dir: Path,
    target: float | None,
    timeout: float = 3600,
    extra: Sequence[str] = (),
) -> PolicyResult:
    """Train ``spec`` under ``policy`` with ``rlgen run`` (and ``extra`` arguments) and summarise the run."""
    args = [str(spec), "--policy", policy, "--workers", str(workers), "--run-dir", str(run_dir), "--quiet"]
    args += ["--iterations", str(iterations)] if iterations else []
    try:
        proc = child.run(["run", *args, *extra], timeout=timeout)
    except subprocess.TimeoutExpired:
        return PolicyResult(policy, workers, False, f"timed out after {timeout:.0f} s")
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "failed").splitlines() if ln.strip()]
        first_error = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "failed")
        return PolicyResult(policy, workers, False, first_error)
    if "--calibrate" not in extra:  # its detached curves.png: drawn before the next row or the directory's removal
        child.drawn(run_dir / "curves.png")
    return read_run(run_dir, policy, workers, target)


def bench(
    spec: Path,
    policies: Sequence[str],
    workers: int,
    iterations: int | None,
    target: float | None = None,
    not_applicable: dict[str, str] | None = None,
    extra: Sequence[str] = (),
) -> list[PolicyResult]:
    """Run ``spec`` under each policy (``single`` on 1 worker, the others on ``workers``), with
    ``extra`` arguments to every ``rlgen run`` (e.g. ``--set``); ``not_applicable`` maps a
    policy the spec does not validate under to the reason."""
    out = []
    with tempfile.TemporaryDirectory(prefix="rlgen-bench-") as tmp:
        for policy in policies:
            n = 1 if policy == "single" else workers
            if not_applicable and policy in not_applicable:
                out.append(PolicyResult(policy, n, False, not_applicable[policy], applies=False))
                continue
            out.append(run_policy(spec, policy, n, iterations, Path(tmp) / policy, target, extra=extra))
    return out


def _fmt(value: float | None, spec: str = "{:,.0f}") -> str:
    return "-" if value is None else spec.format(value)


def format_table(results: Sequence[PolicyResult], target: float | None = None) -> str:
    """One column per policy: steps/s, ms per iteration for each part, and (with a target) time to it."""
    head = ["", *(f"{r.policy} ({r.workers})" for r in results)]
    rows = [
        ["env steps", *(_fmt(r.env_steps) if r.ok else "failed" if r.applies else "n/a" for r in results)],
        ["training time (s)", *(_fmt(r.wall, "{:.1f}") if r.ok else "-" for r in results)],
        ["steps/s (after the 1st iteration)", *(_fmt(r.steps_per_s) if r.ok else "-" for r in results)],
    ]
    if target is not None:
        rows.append([f"time to {target:g} (s)", *(_fmt(r.time_to_target, "{:.1f}") for r in results)])
        rows.append([f"steps to {target:g}", *(_fmt(r.steps_to_target) for r in results)])
    rows.append(["mean return (last 100)", *(_fmt(r.final_return, "{:.1f}") for r in results)])
    for part in PARTS:
        rows.append([f"ms/iteration {part}", *(_fmt(r.ms_per_iteration.get(part), "{:.1f}") for r in results)])
    if any(r.rest_ms_per_iteration for r in results):  # the actors', env workers', other learners' time
        for part in PARTS:
            cells = (_fmt(r.rest_ms_per_iteration.get(part), "{:.1f}") for r in results)
            rows.append([f"other ranks: {part}", *cells])
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in [head, *rows]
    ]
    notes = [f"{r.policy}: {'failed: ' if r.applies else 'not applicable: '}{r.error}" for r in results if not r.ok]
    return "\n".join(lines + notes)


@dataclass(frozen=True)
class BenchRequest:
    spec: Path
    policies: tuple[str, ...] = ()  # none: every policy
    workers: int = 2
    iterations: int = 20
    deployment: Deployment = Deployment()  # --seed / --set for every row


def compare(request: BenchRequest) -> list[PolicyResult]:
    """Every asked-for policy the spec validates under, trained for ``iterations`` (the others
    marked not applicable, with the reason)."""
    from rlgen.api import validate_file
    from rlgen.codegen.policies import POLICIES
    from rlgen.dsl.diagnostics import Severity

    policies = list(request.policies or POLICIES)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
    if not Path(request.spec).is_file():
        raise UsageError(f"{request.spec} does not exist")
    skip = {}
    for policy in policies:
        workers = 1 if policy == "single" else request.workers
        result = validate_file(request.spec, policy=policy, workers=workers, settings=request.deployment.settings)
        if not result.ok:
            first = next(d for d in result.diagnostics if d.severity is Severity.ERROR)
            skip[policy] = f"{first.message} ({first.code})"
    extra = request.deployment.setting_argv()
    return bench(Path(request.spec), policies, request.workers, request.iterations, not_applicable=skip, extra=extra)
