"""Learning on a multi-agent spec: the late mean return per seed, over seeds, and a random policy's.

Each seed is trained by ``python -m rlgen run SPEC --seed S --set train.total_steps=N
[--set ...] --run-dir OUT/seed-S --quiet`` in a fresh process, one after the other (a run
directory that already holds a finished run of that budget is read, not run again:
``--rerun`` forces it). Per seed it prints the mean of the logged ``mean_return`` (the
rolling mean of the last 100 episodes' returns; an episode's return is the mean over agents
of each agent's return) over the metrics rows in the last 5% of the joint env steps
(``--last``), the last row's value, the wall time and joint env steps/s (run.json); then the
mean and the spread (sample standard deviation, min..max) over seeds.

The random baseline: uniform random actions on the host env the spec trains on, read from the
first run's resolved config: ``rlgen.runtime.mpe.reference:reference_spread`` (the reference
MAPPO's reward and landmarks, mpe2 physics) when the spec uses ``reward: reference`` or that
env, otherwise the spec's ``pettingzoo`` env with its kwargs (mpe2's simple_spread_v3),
stepped by ``rlgen.runtime.agents.ParallelVectorEnv`` (``--baseline-envs`` copies) until
``--baseline-episodes`` episodes end; same return definition.

    python benchmarks/marl_learning.py --spec SPEC --seeds 1,2,3 --steps 2000000 --out DIR
        [--set PATH=VALUE ...] [--last 0.05] [--baseline-episodes 256] [--rerun]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rlgen.runtime.agents import ParallelVectorEnv

REFERENCE = "rlgen.runtime.mpe.reference:reference_spread"


def train(spec: Path, seed: int, steps: int, sets: list[str], run_dir: Path, rerun: bool) -> None:
    info = run_dir / "run.json"
    if not rerun and info.exists():
        done = json.loads(info.read_text())
        resolved = run_dir / "spec.resolved.json"
        budget = json.loads(resolved.read_text())["train"]["total_steps"] if resolved.exists() else None
        # finished on this budget (a budget that is not whole iterations stops at the last whole one)
        if done.get("status") == "finished" and (budget == steps or done.get("env_steps", 0) >= steps):
            print(f"  seed {seed}: reusing the finished run in {run_dir}")
            return
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--seed", str(seed)]
    cmd += ["--set", f"train.total_steps={steps}"]
    for s in sets:
        cmd += ["--set", s]
    cmd += ["--run-dir", str(run_dir), "--quiet"]
    print("  $ " + " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(
        f"    exit {proc.returncode} after {time.perf_counter() - t0:.0f} s: {proc.stdout.strip()[-300:]}", flush=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])


def summarise(run_dir: Path, last: float) -> dict:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    info = json.loads((run_dir / "run.json").read_text())
    total = rows[-1]["env_steps"]
    late = [r["mean_return"] for r in rows if r["env_steps"] > (1 - last) * total and r.get("mean_return") is not None]
    return {
        "late": float(np.mean(late)),
        "rows": len(late),
        "final": rows[-1]["mean_return"],
        "steps": info["env_steps"],
        "elapsed": info["elapsed"],
        "rate": info["env_steps"] / info["elapsed"],
        "env": info["config"]["env"],
    }


def baseline(env: dict, episodes: int, num_envs: int, seed: int = 12345) -> tuple[str, dict, list[float]]:
    """(env reference, kwargs, returns) of uniform random actions on the host version of ``env``."""
    kwargs = dict(env.get("kwargs") or {})
    reward = kwargs.pop("reward", "mpe2")
    physics = kwargs.pop("physics", "mpe2")  # the host envs integrate as mpe2 does
    if physics != "mpe2":
        print(f"(the random baseline runs on mpe2's physics, the runs on physics: {physics})")
    ref = env["pettingzoo"]
    if reward == "reference" or "reference" in ref:
        ref = REFERENCE
        kwargs.pop("local_ratio", None)  # the reference has no local part
    venv = ParallelVectorEnv(ref, num_envs=num_envs, seed=seed, kwargs=kwargs)
    rng = np.random.default_rng(seed)
    venv.reset()
    returns: list[float] = []
    while len(returns) < episodes:
        venv.step(rng.integers(0, venv.action_n, venv.num_rows))
        returns += [ret for ret, _ in venv.drain_episodes()]
    return ref, kwargs, returns[:episodes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", type=int, required=True, help="joint env steps per seed")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--last", type=float, default=0.05, help="the late part of the steps averaged")
    parser.add_argument("--baseline-episodes", type=int, default=256)
    parser.add_argument("--baseline-envs", type=int, default=32)
    parser.add_argument("--rerun", action="store_true")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)

    print(f"spec {args.spec}, sets {args.sets}, {args.steps:,} joint env steps, seeds {seeds}; load {os.getloadavg()}")
    results = {}
    for seed in seeds:
        run_dir = args.out / f"seed-{seed}"
        train(args.spec, seed, args.steps, args.sets, run_dir, args.rerun)
        results[seed] = summarise(run_dir, args.last)

    env = results[seeds[0]]["env"]
    print(f"\nenv: {env['pettingzoo']} kwargs {env['kwargs']} backend {env.get('backend')}, {env.get('agents')} agents")
    print(f"mean return = mean over agents of each agent's return; late = metrics rows in the last {args.last:.0%}")
    head = f"{'seed':>4} {'late mean':>10} {'rows':>5} {'last row':>9} {'steps':>10} {'wall s':>7} {'steps/s':>8}"
    print(head)
    print("-" * len(head))
    for seed, r in results.items():
        print(
            f"{seed:>4} {r['late']:>10.2f} {r['rows']:>5} {r['final']:>9.2f} {r['steps']:>10,} "
            f"{r['elapsed']:>7.0f} {r['rate']:>8,.0f}"
        )
    late = [r["late"] for r in results.values()]
    sd = statistics.stdev(late) if len(late) > 1 else 0.0
    print(f"over {len(late)} seeds: mean {np.mean(late):.2f}, sd {sd:.2f}, min..max {min(late):.2f}..{max(late):.2f}")

    t0 = time.perf_counter()
    ref, kwargs, rets = baseline(env, args.baseline_episodes, args.baseline_envs)
    print(
        f"random policy on host {ref} {kwargs}: {len(rets)} episodes, mean {np.mean(rets):.2f}, "
        f"sd {np.std(rets, ddof=1):.2f}, s.e. {np.std(rets, ddof=1) / np.sqrt(len(rets)):.2f} "
        f"({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
