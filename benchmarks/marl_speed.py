"""MAPPO on simple_spread: joint env steps/s per way of running it, side by side in one run.

The spec is examples/mappo-simple-spread.rl.yaml (mpe2 1.1.1 simple_spread_v3, N=3,
local_ratio 0.5, max_cycles 25; 128 env copies x 25 steps, 10 epochs over one minibatch),
written into a temporary directory in two copies: as it is (the host mpe2 env, stepped from
Python by ``rlgen.runtime.agents.ParallelVectorEnv``) and with ``env.backend: tensorflow``
(the in-graph TFSpread, mpe2 reward). Each variant is trained by
``python -m rlgen run COPY --iterations K --quiet`` in a fresh process, one after the other
(``--rounds R`` repeats the whole sequence, alternating, so load drifts hit every variant):

* ``host single``: the host env, ``--policy single``;
* ``host actors-learner``: the host env, ``--policy actors-learner --workers W``;
* ``host async-actors``: the host env, ``--policy async-actors --workers W``;
* ``in-graph single``: the in-graph env, ``--policy single`` (one compiled call per iteration).

Figures come from each run's own metrics.jsonl (through ``rlgen.app.bench.read_run``): the
steady rate is ``(env_steps[K] - env_steps[w]) / (time[K] - time[w])`` with the first ``w``
(``--warmup``, default 2) iteration rows left out (tracing, compiling, worker start-up);
``run`` is run.json's ``env_steps / elapsed`` over every iteration. Steps are joint env steps
(one step of all 3 agents of a copy), updates included. Per-part times (ms per iteration, the
same steady rows) are rank 0's (the learner, or the whole loop under ``single``) and, for
policies with other ranks, their mean per rank; an in-graph ``single`` iteration is one call,
timed as ``loop``.

With ``--reference DIR`` the reference MAPPO trainer (marlbenchmark/on-policy, run from its own
checkout and virtual environment: :mod:`benchmarks.reference_mappo`) runs in the same rounds
with the same settings, as ``reference rmappo`` (its script's GRU policy) and, with
``--reference-algos rmappo,mappo``, ``reference mappo`` (an MLP policy, as rlgen's), each for
``--reference-updates`` updates; its steady rate is timed from its own progress lines.

With ``--auto-steps N`` a ``--policy auto`` run on the host env (``--recalibrate``: it profiles and
measures afresh, whatever this machine remembers) trains N joint steps in the same rounds, as
``host auto``; its steady rate is over its last ``--iterations`` less ``--warmup`` rows, all under
the policy it chose (named in the table), so it compares with the policies it chose among.

    python benchmarks/marl_speed.py [--iterations 8] [--warmup 2] [--workers 3] [--rounds 1]
        [--reference DIR [--reference-algos rmappo,mappo] [--reference-updates 40]] [--auto-steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from reference_mappo import run_reference  # beside this script (benchmarks/ is not a package)

from rlgen.app import child
from rlgen.app.bench import PARTS, read_run, run_policy

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "mappo-simple-spread.rl.yaml"


def write_specs(tmp: Path, envs: int | None = None) -> dict[str, Path]:
    """The example as it is (host) and with ``env.backend: tensorflow`` (in-graph), in ``tmp``;
    ``envs``: another number of env copies."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    if envs:
        spec["env"]["num_envs"] = envs
    spec["train"]["checkpoint"] = {"every": 10**9, "keep": 1}  # no checkpoint inside a short run
    host = tmp / "mappo-host.rl.yaml"
    host.write_text(yaml.safe_dump(spec, sort_keys=False))
    spec["env"]["backend"] = "tensorflow"
    ingraph = tmp / "mappo-ingraph.rl.yaml"
    ingraph.write_text(yaml.safe_dump(spec, sort_keys=False))
    return {"host": host, "ingraph": ingraph}


def run_variant(spec: Path | None, policy: str, workers: int, run_dir: Path, args: argparse.Namespace) -> Any:
    """One run of a variant, with its process's wall time: the reference trainer (``spec`` None,
    timed from its own log), a ``--policy auto`` run, or rlgen under one policy."""
    t0 = time.perf_counter()
    if spec is None:
        return run_reference(args.reference, policy, args.reference_updates)
    if policy == "auto":
        res = run_auto(spec, args.auto_steps, args.calibration_budget, run_dir, args)
    else:
        res = run_policy(spec, policy, workers, args.iterations, run_dir, None, timeout=args.timeout)
        if res.ok:
            res = read_run(run_dir, policy, workers, None, warmup=args.warmup)
            info = json.loads((run_dir / "run.json").read_text())
            res.run_rate = info["env_steps"] / info["elapsed"]
    res.process_wall = time.perf_counter() - t0
    return res


def run_auto(spec: Path, steps: int, budget: float, run_dir: Path, args: argparse.Namespace) -> SimpleNamespace:
    """A ``--policy auto`` run of ``steps`` joint steps; its steady rate over its last rows."""
    cmd = ["run", str(spec), "--policy", "auto", "--recalibrate", "--calibration-budget", str(budget)]
    cmd += ["--set", f"train.total_steps={steps}", "--run-dir", str(run_dir), "--quiet"]
    try:
        proc = child.run(cmd, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return SimpleNamespace(ok=False, error=f"timed out after {args.timeout:.0f} s")
    if proc.returncode != 0:
        return SimpleNamespace(ok=False, error=(proc.stderr or proc.stdout).strip()[-300:])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    info = json.loads((run_dir / "run.json").read_text())
    choice = (info.get("auto") or {}).get("choice") or {"policy": "single", "workers": 1}
    k = max(1, min(args.iterations - args.warmup, len(rows) - 1))
    first, last = rows[-k - 1], rows[-1]
    rate = (last["env_steps"] - first["env_steps"]) / (last["time"] - first["time"])
    return SimpleNamespace(
        ok=True,
        steps_per_s=rate,
        run_rate=info["env_steps"] / info["elapsed"],
        iterations=k,
        chose=f"{choice['policy']} x{choice['workers']}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2, help="iteration rows left out of the rates")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--envs", type=int, default=None, help="env copies (default: the example's 128)")
    parser.add_argument(
        "--distributed",
        default="actors-learner,async-actors",
        help="the distributed policies to run on the host env, comma-separated",
    )
    parser.add_argument("--reference", type=Path, default=None, help="a reference MAPPO checkout (see above)")
    parser.add_argument("--reference-algos", default="rmappo", help="the reference's algorithms, comma-separated")
    parser.add_argument("--reference-updates", type=int, default=40, help="updates of 3,200 steps per reference run")
    parser.add_argument("--auto-steps", type=int, default=0, help="a --policy auto run of this many steps (0: none)")
    parser.add_argument("--calibration-budget", type=float, default=60.0, help="the auto run's calibration budget, s")
    args = parser.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; load {os.getloadavg()}")
    envs = f", {args.envs} env copies" if args.envs else ""
    print(f"spec: {EXAMPLE.relative_to(ROOT)}{envs}; --iterations {args.iterations}, first {args.warmup} rows left out")
    with tempfile.TemporaryDirectory(prefix="marl-speed-") as tmpdir:
        tmp = Path(tmpdir)
        specs = write_specs(tmp, args.envs)
        distributed = [p for p in args.distributed.split(",") if p]
        variants = [
            ("host single", specs["host"], "single", 1),
            *((f"host {p} x{args.workers}", specs["host"], p, args.workers) for p in distributed),
            ("in-graph single", specs["ingraph"], "single", 1),
        ]
        if args.auto_steps:
            variants.append(("host auto", specs["host"], "auto", 0))
        if args.reference is not None:
            variants += [(f"reference {a}", None, a, 1) for a in args.reference_algos.split(",") if a]
        results: dict[str, list] = {label: [] for label, *_ in variants}
        for r in range(args.rounds):
            for label, spec, policy, workers in variants:
                res = run_variant(spec, policy, workers, tmp / f"{label.replace(' ', '-')}-{r}", args)
                results[label].append(res)
                status = ("ok" + (f", chose {res.chose}" if hasattr(res, "chose") else "")) if res.ok else ""
                status = status or f"FAILED: {res.error}"
                print(
                    f"  round {r + 1} {label}: {status}, process {res.process_wall:.1f} s, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )

        base = (
            statistics.median(r.steps_per_s for r in results["host single"] if r.ok)
            if any(r.ok for r in results["host single"])
            else None
        )
        print()
        print("joint env steps/s (median over rounds; ratio = steady / host single's steady)")
        head = f"{'variant':<28} {'steady':>9} {'ratio':>6} {'run':>9} {'iters':>5} {'process s':>9}"
        envs = args.envs or yaml.safe_load(EXAMPLE.read_text())["env"]["num_envs"]
        steps_per_iteration = 25 * envs  # the example's rollout: 25 steps of every env copy
        print(head)
        print("-" * len(head))
        for label, *_ in variants:
            ok = [r for r in results[label] if r.ok]
            if not ok:
                print(f"{label:<28} failed: {results[label][0].error}")
                continue
            steady = statistics.median(r.steps_per_s for r in ok)
            run_rate = statistics.median(r.run_rate for r in ok)
            wall = statistics.median(r.process_wall for r in ok)
            ratio = f"{steady / base:.2f}" if base else "-"
            iters = getattr(ok[0], "iterations", None) or ok[0].points * 5  # the reference logs every 5 updates
            chose = f"  (chose {', '.join(sorted({r.chose for r in ok}))})" if hasattr(ok[0], "chose") else ""
            print(f"{label:<28} {steady:>9,.0f} {ratio:>6} {run_rate:>9,.0f} {iters:>5} {wall:>9.1f}{chose}")

        print()
        print("ms per iteration by part, steady rows (rank 0; then the other ranks' mean per rank)")
        head = f"{'variant':<36} " + " ".join(f"{p:>9}" for p in PARTS) + f" {'wall':>9}"
        print(head)
        print("-" * len(head))
        for label, *_ in variants:
            ok = [r for r in results[label] if r.ok and hasattr(r, "ms_per_iteration")]
            if not ok:
                continue
            r = ok[0] if len(ok) == 1 else sorted(ok, key=lambda x: x.steps_per_s)[len(ok) // 2]
            per_iter_ms = 1000 * steps_per_iteration / r.steps_per_s if r.steps_per_s else 0.0
            print(
                f"{label + ' rank 0':<36} "
                + " ".join(f"{r.ms_per_iteration.get(p, 0):>9.1f}" for p in PARTS)
                + f" {per_iter_ms:>9.1f}"
            )
            if r.rest_ms_per_iteration:
                print(
                    f"{label + ' other ranks':<36} "
                    + " ".join(f"{r.rest_ms_per_iteration.get(p, 0):>9.1f}" for p in PARTS)
                )
        print(f"(wall = {steps_per_iteration} joint steps / steady rate: one iteration's share of the run's clock)")


if __name__ == "__main__":
    main()
