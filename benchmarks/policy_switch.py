"""Does switching the distribution policy pay? Every policy on four kinds of workload, in one run.

    .venv/bin/python benchmarks/policy_switch.py                          # all workloads, speed only
    .venv/bin/python benchmarks/policy_switch.py --workloads cartpole --target-seeds 0,1,2
    .venv/bin/python benchmarks/policy_switch.py --workloads pixels
    .venv/bin/python benchmarks/policy_switch.py --workloads "" --target-seeds 0,1,2 --target-policies actors-learner
    .venv/bin/python benchmarks/policy_switch.py --json results.json

Workloads (the four ways real ones differ):

* ``cartpole`` — cheap env: ``examples/ppo-cartpole.rl.yaml`` (RL Zoo settings);
* ``ant`` — expensive env: ``benchmarks/specs/ppo-ant.rl.yaml`` (MuJoCo Ant-v5, 12 envs);
* ``large`` — compute-heavy: ``benchmarks/specs/ppo-cartpole-large.rl.yaml`` ([256, 256] networks);
* ``pixels`` — images: ``examples/ppo-breakout.rl.yaml`` (ALE Breakout, the Zoo's Atari settings:
  uint8 ``[4, 84, 84]`` frames, 28 KB an env step, across every cut; a Nature CNN whose
  update is most of an iteration and runs on every core under ``single``).

For each, every policy with 2 and 3 workers (and ``single``) trains for a fixed number of
iterations through ``rlgen run`` in a fresh process, with periodic evaluation off; steps/s
and milliseconds per iteration for each part come from the run's metrics, leaving out the
first iterations (tracing, warm-up). ``rank 0`` is the learner (or the only rank);
``others`` is the mean of the other ranks (actors, env workers, other learners).
``--policy auto`` runs on the same workload twice: first as on a machine that never ran
the spec (an empty cache), then with the speeds the rows above left in the cache (as on a
machine that ran them before, rlgen.app.history); the lines say what it chose, against
the best measured, and what its calibration cost. With ``--target-seeds``, time and env steps to the example's target
return per seed, for ``single`` and every distributed policy on 2 workers, with the spec as
it is (its 100k-step budget).

Ratios are only meaningful within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlgen.app.bench import run_policy, speed_only
from rlgen.codegen.policies import POLICIES
from rlgen.runtime.metricslog import per_iteration

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("inference", "env", "buffer", "update", "comm", "other")


@dataclass(frozen=True)
class Workload:
    name: str
    spec: Path
    iterations: int
    warmup: int  # first iterations left out of rates
    auto_iterations: int  # auto's run: its profile (2 s at least), then a trial's measurement


WORKLOADS = {
    "cartpole": Workload("cartpole", ROOT / "examples" / "ppo-cartpole.rl.yaml", 150, 5, 400),
    # 8 left out: asynchronous actors queue up to 2 rollouts each while the learner starts,
    # which a short window would count as speed
    "ant": Workload("ant", ROOT / "benchmarks" / "specs" / "ppo-ant.rl.yaml", 30, 8, 20),
    "large": Workload("large", ROOT / "benchmarks" / "specs" / "ppo-cartpole-large.rl.yaml", 16, 2, 24),
    # an iteration (1,024 steps) takes 3.7 s under single on 2 quiet cores, the update 2.7 of
    # it, and the first (which traces the conv update) longer: 4 iterations, the first left
    # out, keep a row near a minute. The learner is the slowest role under every policy, so
    # the rollouts asynchronous actors queue while it starts do not inflate a short window.
    # auto: the profile (4 iterations after the first), then a trial's 2 + 8 iterations
    "pixels": Workload("pixels", ROOT / "examples" / "ppo-breakout.rl.yaml", 4, 1, 16),
}
CANDIDATES = [("single", 1)] + [
    (p, w)
    for p in ("actors-learner", "async-actors", "central-inference", "pipelined-inference", "multi-learner")
    for w in (2, 3)
]


def rates(run_dir: Path, warmup: int) -> dict:
    """steps/s and ms per iteration for each part (rank 0, and the other ranks' mean) after ``warmup``."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steady = rows[warmup:] if len(rows) > warmup + 1 else rows[1:]
    span = steady[-1]["time"] - rows[rows.index(steady[0]) - 1]["time"]
    steps = steady[-1]["env_steps"] - rows[rows.index(steady[0]) - 1]["env_steps"]

    def ms(key: str) -> float | None:
        having = [r for r in steady if key in r]
        return 1000 * per_iteration(having, key) if having else None

    lags = [r["policy_lag"] for r in steady if "policy_lag" in r]
    return {
        "steps_per_s": steps / span if span > 0 else 0.0,
        "rank0": {p: ms(f"time_{p}") for p in PARTS},
        "others": {p: ms(f"rest_time_{p}") for p in PARTS},
        "policy_lag": statistics.fmean(lags) if lags else None,
        "dropped": rows[-1].get("dropped"),
    }


def measure(workload: Workload, tmp: Path, cache: Path) -> list[dict]:
    """Every candidate's figures; each run's speed also lands in ``cache`` (what a machine
    that ran these before would remember for ``--policy auto``)."""
    spec = speed_only(workload.spec, tmp)
    with _speeds_in(cache):
        return [_measure_one(spec, policy, workers, workload, tmp) for policy, workers in CANDIDATES]


@contextlib.contextmanager
def _speeds_in(cache: Path) -> Iterator[None]:
    """The runs started meanwhile keep their speeds in ``cache`` (rlgen.app.history)."""
    os.environ["RLGEN_CACHE_DIR"] = str(cache)
    try:
        yield
    finally:
        del os.environ["RLGEN_CACHE_DIR"]


def _measure_one(spec: Path, policy: str, workers: int, workload: Workload, tmp: Path) -> dict:
    name = f"{policy}-{workers}"
    result = run_policy(spec, policy, workers, workload.iterations, tmp / name, None, 1800, ["--calibrate"])
    row = {"policy": policy, "workers": workers, "ok": result.ok, "error": result.error}
    if result.ok:
        row.update(rates(tmp / name, workload.warmup))
    print(f"  {name}: " + (f"{row['steps_per_s']:,.0f} steps/s" if result.ok else result.error), flush=True)
    return row


def run_auto(workload: Workload, tmp: Path, cache: Path, label: str) -> dict:
    """``rlgen run --policy auto`` on the workload (evaluation off, its default calibration
    budget: 10% of the spec's whole run), stopped once it has chosen and measured a tried policy, with
    ``cache`` as the machine's memory of measured speeds (rlgen.app.history)."""
    spec = speed_only(workload.spec, tmp)
    run_dir = tmp / f"auto-{label}"
    with _speeds_in(cache):  # 1 worker: this machine's default
        result = run_policy(spec, "auto", 1, workload.auto_iterations, run_dir, None, 3600)
    if not result.ok:
        return {"error": result.error}
    record = json.loads((run_dir / "run.json").read_text())["auto"]
    print(
        f"  auto ({label}): {record['choice']} ({record['why']}), calibration {record['calibration_s']:.1f} s"
        + _tried(record),
        flush=True,
    )
    return record


def _tried(record: dict) -> str:
    """What auto tried, if it tried a candidate, and whether it kept it."""
    trial = record.get("trial")
    if not trial:
        return ""
    speed = trial.get("steps_per_s")
    measured = "not measured before the run ended" if speed is None else f"{speed:,.0f} steps/s"
    kept = "kept" if trial.get("kept", True) else "went back to single"
    return f"; tried {trial['policy']} ({trial['workers']}): {measured}, {kept}"


def _fmt(value: float | None, spec: str = "{:.1f}") -> str:
    return "-" if value is None else spec.format(value)


def auto_line(auto: dict, rows: list[dict], total_steps: int) -> str:
    """What auto chose, against the best measured here; its calibration against the whole run."""
    if "error" in auto:
        return f"auto: failed: {auto['error']}"
    ok = [r for r in rows if r["ok"]]
    best = max(ok, key=lambda r: r["steps_per_s"])
    pick = auto["choice"]
    row = next((r for r in ok if (r["policy"], r["workers"]) == (pick["policy"], pick["workers"])), None)
    share = row["steps_per_s"] / best["steps_per_s"] if row else None
    run_s = total_steps / best["steps_per_s"]
    return (
        f"auto chose {pick['policy']} ({pick['workers']}): {_fmt(share, '{:.0%}')} of the best measured steps/s; "
        f"calibration {auto['calibration_s']:.1f} s = {auto['calibration_s'] / run_s:.1%} of the whole run "
        f"({total_steps:,} steps at the best speed, {run_s:.0f} s)" + _tried(auto)
    )


def table(workload: str, rows: list[dict]) -> str:
    ok = [r for r in rows if r["ok"]]
    base = next((r["steps_per_s"] for r in ok if r["policy"] == "single"), None)
    head = "| policy (workers) | steps/s | x single | rank 0 ms: " + " / ".join(PARTS) + " | others ms: "
    head += " / ".join(PARTS) + " | lag |"
    lines = [f"### {workload}", "", head, "|" + "---|" * 6]
    for r in rows:
        if not r["ok"]:
            lines.append(f"| {r['policy']} ({r['workers']}) | n/a: {r['error'][:80]} | | | | |")
            continue
        ratio = r["steps_per_s"] / base if base else None
        parts0 = " / ".join(_fmt(r["rank0"][p]) for p in PARTS)
        parts1 = " / ".join(_fmt(r["others"][p]) for p in PARTS)
        lines.append(
            f"| {r['policy']} ({r['workers']}) | {r['steps_per_s']:,.0f} | {_fmt(ratio, '{:.2f}')} | "
            f"{parts0} | {parts1} | {_fmt(r['policy_lag'], '{:.2f}')} |"
        )
    if ok:
        best = max(ok, key=lambda r: r["steps_per_s"])
        worst = min(ok, key=lambda r: r["steps_per_s"])
        lines.append("")
        lines.append(
            f"best {best['policy']} ({best['workers']}) {best['steps_per_s']:,.0f} steps/s; worst "
            f"{worst['policy']} ({worst['workers']}) {worst['steps_per_s']:,.0f}; best/worst "
            f"{best['steps_per_s'] / worst['steps_per_s']:.2f}x"
            + (f"; best/single {best['steps_per_s'] / base:.2f}x" if base else "")
        )
    return "\n".join(lines)


def time_to_target(spec: Path, seeds: list[int], tmp: Path, policies: Sequence[str] = POLICIES) -> dict:
    """Wall time of the run's own clock until the target return, per policy (single always,
    the others with 2 workers) and seed (spec as is)."""
    target = float(re.search(r"mean_return: ([-\d.]+)", spec.read_text()).group(1))
    out: dict = {"target": target}
    for policy, workers in (("single", 1), *((p, 2) for p in policies if p != "single")):
        times, steps = [], []
        for seed in seeds:
            seeded = tmp / f"seed{seed}-{spec.name}"
            seeded.write_text(re.sub(r"  seed: \d+", f"  seed: {seed}", spec.read_text()))
            r = run_policy(seeded, policy, workers, None, tmp / f"t-{policy}-{seed}", target, timeout=1800)
            times.append(r.time_to_target)
            steps.append(r.steps_to_target)
            print(f"  {policy} seed {seed}: {_fmt(r.time_to_target)} s to {target:g} ({r.steps_to_target} steps)")
        out[f"{policy}-{workers}"] = {"seconds": times, "steps": steps}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--target-seeds", default="", help="seeds for time to target on cartpole, e.g. 0,1,2")
    parser.add_argument(
        "--target-policies", default=",".join(POLICIES), help="policies timed to target (single is always timed)"
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="rlgen-switch-", ignore_cleanup_errors=True) as tmp_name:
        tmp = Path(tmp_name)
        for name in filter(None, args.workloads.split(",")):
            workload = WORKLOADS[name]
            print(f"{name}: {workload.spec.relative_to(ROOT)}, {workload.iterations} iterations per policy", flush=True)
            (tmp / name).mkdir()
            # auto on a machine that never ran the spec, then on one that measured every candidate
            cold = run_auto(workload, tmp / name, tmp / name / "cache-cold", "first run")
            rows = measure(workload, tmp / name, tmp / name / "cache")
            warm = run_auto(workload, tmp / name, tmp / name / "cache", "after the measurements")
            results[name] = {"rows": rows, "auto": cold, "auto_warm": warm}
        if args.target_seeds:
            seeds = [int(s) for s in args.target_seeds.split(",")]
            print("time to target, cartpole:", flush=True)
            results["time_to_target"] = time_to_target(
                WORKLOADS["cartpole"].spec, seeds, tmp, args.target_policies.split(",")
            )
    print()
    for name, result in results.items():
        if name != "time_to_target":
            total = int(re.search(r"total_steps: (\d+)", WORKLOADS[name].spec.read_text()).group(1))
            print(table(name, result["rows"]))
            print("first run:  " + auto_line(result["auto"], result["rows"], total))
            print("afterwards: " + auto_line(result["auto_warm"], result["rows"], total) + "\n")
    if "time_to_target" in results:
        t = results["time_to_target"]
        base = None
        for key, run in t.items():
            if key == "target":
                continue
            done = [x for x in run["seconds"] if x is not None]
            median = statistics.median(done) if len(done) == len(run["seconds"]) else None
            base = median if key == "single-1" else base
            versus = f", {median / base:.2f}x single" if median and base else ""
            print(
                f"time to {t['target']:g}, {key}: {run['seconds']} s, {run['steps']} steps "
                f"(median {_fmt(median)} s{versus}; reached on {len(done)} of {len(run['seconds'])} seeds)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
