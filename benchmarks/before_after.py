"""``rlgen bench`` before and after a change, on every example both revisions have, side by side.

    .venv/bin/python benchmarks/before_after.py --before ec1e6c8            # after: HEAD
    python -m rlgen.benchmarks.before_after --before ec1e6c8 --after HEAD --examples ppo-cartpole,sac-pendulum
    .venv/bin/python benchmarks/before_after.py --before ec1e6c8 --iterations 20 --rounds 4 --out runs/ba

Each revision is checked out into a temporary git worktree (``TMP/before/rlgen``,
``TMP/after/rlgen``: the folder is named ``rlgen`` so that it imports as the package). For
every ``examples/*.rl.yaml`` present in both, each round runs

    python -m rlgen bench TREE/examples/X.rl.yaml --policies single --iterations N

once per revision, with ``PYTHONPATH`` at that tree, from that tree's ``examples/`` (where a
spec's own modules are found), with this interpreter for both (the same venv) and a cache of
its own per revision (``RLGEN_CACHE_DIR``: builds, XLA's cache and remembered speeds never
cross). The order alternates, ABBA (before, after; then after, before), so that a drifting
machine load falls evenly on both sides. A failed run is printed and the rest go on.

Speed is bench's own figure, "steps/s (after the 1st iteration)" (the first iteration traces
and compiles). Behaviour: bench's temporary directory is kept (``tempfile`` in
``rlgen.app.bench`` is swapped for one that keeps its run directories, nothing else), and
every row of each run's ``metrics.jsonl`` is compared with every other run's, all columns
but the clock's (``time``, ``steps_per_s``, ``time_*``, ``rest_time_*``): env steps,
episodes, returns, losses, entropies, gradient norms, evaluations. Under one seed on CPU,
equal rows in every run, before and after, are the evidence that training does exactly what
it did. ``identical`` means every run's rows equal; ``differ`` names the first row and
column where an after run leaves the before runs' rows; ``not reproducible`` means the runs
of one revision already differ among themselves.

Iterations default to a number per example that takes roughly 10-30 s on the shared 2-core
machine (``ITERATIONS``); ``--iterations`` sets one number for all. Ratios are only
meaningful within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository whose revisions are compared

# iterations per example: roughly 10-30 s of training each on the shared 2-core machine
# (probed 2026-11-29 under a load average of 6-8); an iteration's size differs widely
ITERATIONS = {
    "a2c-cartpole": 2000,  # 40 env steps an iteration
    "custom-network": 200,
    "dqn-cartpole": 24,  # 256 env steps, 128 gradient steps after the first 1,000
    "ppo-cartpole": 300,  # 256 env steps (the stop target may end it sooner)
    "ppo-cartpole-ingraph": 391,  # the whole 100,096-step budget: 18k steps/s
    "ppo-halfcheetah": 12,  # 512 env steps, 10 epochs
    "ppo-pendulum": 12,  # 4,096 env steps
    "sac-halfcheetah": 5000,  # 1 env step: random actions for the first 10,000 (not reached)
    "sac-mountaincar-continuous": 80,  # 32 env steps, 32 gradient steps
    "sac-pendulum": 500,  # 1 env step and 1 gradient step (after the first 100): about 30 steps/s
    "td3-halfcheetah": 5000,  # 1 env step: random actions for the first 10,000 (not reached)
    "td3-pendulum": 52,  # a 200-step episode; learning after 10,000 steps, then about 7 s an iteration
    "mappo-simple-spread": 8,  # 128 copies x 25 steps, 10 epochs
    "ippo-simple-spread": 8,
}
DEFAULT_ITERATIONS = 20  # an example not in ITERATIONS

# `rlgen bench` with its temporary directory kept in argv[1]: its run directories survive
SHIM = """\
import contextlib, sys, types
import rlgen.app.bench as bench
keep = sys.argv[1]
bench.tempfile = types.SimpleNamespace(TemporaryDirectory=lambda **kw: contextlib.nullcontext(keep))
from rlgen.cli import main
sys.exit(main(sys.argv[2:]))
"""
SPEED_ROW = "steps/s (after the 1st iteration)"
SIDES = ("before", "after")


@dataclass
class Run:
    side: str
    round: int
    ok: bool
    wall: float
    error: str = ""
    steps_per_s: dict[str, float] = field(default_factory=dict)  # per policy, bench's figure
    rows: dict[str, list[dict]] = field(default_factory=dict)  # per policy, metrics rows without the clock


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def is_clock(column: str) -> bool:
    """A column that measures time, not what training did."""
    return column in ("time", "steps_per_s", "elapsed") or column.startswith(("time_", "rest_time_"))


def learning_rows(metrics: Path) -> list[dict]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if not is_clock(k)} for row in rows]


def parse_speeds(stdout: str, policies: list[str]) -> dict[str, float]:
    """bench's steps/s cells, one per policy column ('-' for a failed row: left out)."""
    line = next((ln for ln in stdout.splitlines() if ln.startswith(SPEED_ROW)), "")
    cells = line[len(SPEED_ROW) :].split()
    return {p: float(c.replace(",", "")) for p, c in zip(policies, cells, strict=False) if c != "-"}


def bench_once(tree: Path, example: str, args: argparse.Namespace, keep: Path, cache: Path, rnd: int) -> Run:
    """One ``rlgen bench`` of ``tree``'s example, its run directories kept in ``keep``, its caches in ``cache``."""
    side = tree.parent.name
    keep.mkdir(parents=True, exist_ok=True)
    policies = [p for p in args.policies.split(",") if p]
    iterations = args.iterations or ITERATIONS.get(example, DEFAULT_ITERATIONS)
    spec = tree / "examples" / f"{example}.rl.yaml"
    bench = ["bench", str(spec), "--policies", args.policies, "--iterations", str(iterations)]
    env = {**os.environ, "PYTHONPATH": str(tree.parent), "RLGEN_CACHE_DIR": str(cache)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", SHIM, str(keep), *bench],
            cwd=tree / "examples",
            env=env,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        return Run(side, rnd, False, time.perf_counter() - t0, f"timed out after {args.timeout:.0f} s")
    run = Run(side, rnd, proc.returncode == 0, time.perf_counter() - t0)
    run.steps_per_s = parse_speeds(proc.stdout, policies)
    for policy in policies:
        metrics = keep / policy / "metrics.jsonl"
        if metrics.is_file():
            run.rows[policy] = learning_rows(metrics)
    if not run.ok:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "failed" in ln or "error" in ln.lower()]
        run.error = (lines[-1] if lines else f"exit {proc.returncode}").strip()
    return run


def first_difference(a: list[dict], b: list[dict]) -> str:
    """Where ``b`` first leaves ``a``: 'row I COLUMN: X -> Y' (or a length)."""
    for i, (ra, rb) in enumerate(zip(a, b, strict=False)):
        for k in sorted(set(ra) | set(rb)):
            if ra.get(k) != rb.get(k):
                return f"row {i + 1} {k}: {ra.get(k)} -> {rb.get(k)}"
    return f"{len(a)} rows -> {len(b)} rows"


def verdict(runs: list[Run], policy: str) -> str:
    """identical / differ (where) / not reproducible / no metrics, over every run's rows."""
    by_side = {s: [r.rows[policy] for r in runs if r.side == s and policy in r.rows] for s in SIDES}
    if not by_side["before"] or not by_side["after"]:
        return "no metrics"
    for side in SIDES:
        if any(rows != by_side[side][0] for rows in by_side[side]):
            odd = next(rows for rows in by_side[side] if rows != by_side[side][0])
            return f"not reproducible ({side}: {first_difference(by_side[side][0], odd)})"
    if by_side["before"][0] == by_side["after"][0]:
        return f"identical ({len(by_side['before'][0])} rows)"
    return f"differ ({first_difference(by_side['before'][0], by_side['after'][0])})"


def last_figures(runs: list[Run], policy: str) -> str:
    """The last row's mean return and loss of the first run that has them, for the table."""
    rows = next((r.rows[policy] for r in runs if r.rows.get(policy)), None)
    if not rows:
        return "-"
    last = rows[-1]
    loss = next((k for k in ("loss", "critic_loss", "value_loss", "q_loss", "actor_loss") if k in last), None)
    ret = last.get("mean_return")
    parts = [f"return {ret:.4f}" if isinstance(ret, float | int) else "return -"]
    if loss and isinstance(last[loss], float | int):
        parts.append(f"{loss} {last[loss]:.6g}")
    return ", ".join(parts) + f" @ {last.get('env_steps', '?')} steps"


def checkout(rev: str, where: Path) -> str:
    """A detached worktree of ``rev`` at ``where`` (a folder named rlgen); its full hash."""
    full = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    where.parent.mkdir(parents=True, exist_ok=True)
    git("worktree", "add", "--detach", str(where), full)
    return full


def examples_in(tree: Path) -> set[str]:
    return {p.name.removesuffix(".rl.yaml") for p in (tree / "examples").glob("*.rl.yaml")}


def report(example: str, runs: list[Run], policies: list[str], iterations: int) -> list[str]:
    """The example's table lines: one per policy."""
    lines = []
    for policy in policies:
        speeds = {s: [r.steps_per_s[policy] for r in runs if r.side == s and policy in r.steps_per_s] for s in SIDES}
        med = {s: statistics.median(v) if v else None for s, v in speeds.items()}
        ratio = f"{med['after'] / med['before']:.2f}" if med["before"] and med["after"] else "-"
        cells = [
            f"{example}{'' if len(policies) == 1 else ' ' + policy}",
            str(iterations),
            " ".join(f"{v:,.0f}" for v in speeds["before"]) or "failed",
            " ".join(f"{v:,.0f}" for v in speeds["after"]) or "failed",
            f"{med['before']:,.0f}" if med["before"] else "-",
            f"{med['after']:,.0f}" if med["after"] else "-",
            ratio,
            verdict(runs, policy),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the revision before the change")
    ap.add_argument("--after", default="HEAD", help="the revision after it (default HEAD)")
    ap.add_argument("--examples", default="", help="comma-separated example names (default: all in both)")
    ap.add_argument("--policies", default="single", help="passed to rlgen bench (default single)")
    ap.add_argument("--iterations", type=int, default=None, help="for every example (default: ITERATIONS)")
    ap.add_argument("--rounds", type=int, default=2, help="runs per revision and example, ABBA (default 2)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per bench run (default 900)")
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories here (default: deleted)")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]

    tmp = Path(tempfile.mkdtemp(prefix="rlgen-before-after-"))
    trees = {s: tmp / s / "rlgen" for s in SIDES}
    runs_dir = args.out.resolve() if args.out else tmp / "runs"
    load0 = os.getloadavg()
    print(f"date {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; {os.cpu_count()} CPUs", flush=True)
    print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    hashes = {}
    try:
        for side, rev in zip(SIDES, (args.before, args.after), strict=True):
            hashes[side] = checkout(rev, trees[side])
            print(f"{side}: {rev} = {hashes[side]} ({git('log', '-1', '--format=%cs %s', hashes[side])[:90]})")
        both = examples_in(trees["before"]) & examples_in(trees["after"])
        wanted = [e for e in args.examples.split(",") if e] or sorted(both)
        for name in sorted(set(wanted) - both):
            print(f"{name}: not in both revisions, skipped")
        examples = [e for e in wanted if e in both]
        table = [
            "| example | iterations | before steps/s | after steps/s | median before | median after "
            "| after/before | metrics |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for example in examples:
            same = [(trees[s] / "examples" / f"{example}.rl.yaml").read_bytes() for s in SIDES]
            print(f"\n{example}" + ("" if same[0] == same[1] else " (the spec differs between the revisions)"))
            runs: list[Run] = []
            for rnd in range(args.rounds):
                for side in SIDES if rnd % 2 == 0 else SIDES[::-1]:  # ABBA
                    keep = runs_dir / example / f"{side}-{rnd + 1}"
                    run = bench_once(trees[side], example, args, keep, tmp / f"cache-{side}", rnd + 1)
                    runs.append(run)
                    speeds = ", ".join(f"{p} {v:,.0f} steps/s" for p, v in run.steps_per_s.items()) or "no speed"
                    status = speeds if run.ok else f"FAILED: {run.error}"
                    print(f"  round {rnd + 1} {side}: {status} ({run.wall:.0f} s, load {os.getloadavg()[0]:.1f})")
                    sys.stdout.flush()
            iterations = args.iterations or ITERATIONS.get(example, DEFAULT_ITERATIONS)
            lines = report(example, runs, policies, iterations)
            table += lines
            print("\n".join(lines))
            for policy in policies:
                print(f"  last row ({policy}): {last_figures(runs, policy)}", flush=True)
        load1 = os.getloadavg()
        print(f"\nbefore {hashes['before'][:10]}, after {hashes['after'][:10]}; rlgen bench --policies {args.policies}")
        print("\n".join(table))
        print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
        print(f"load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    finally:
        for side in SIDES:
            if trees[side].exists():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[side])], check=False)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
