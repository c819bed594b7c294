"""What periodic evaluation costs a run: the examples with their ``eval`` line, evaluated in a
process beside training (the default: forked from rank 0 before TensorFlow runs; or started
afresh, ``RLGEN_EVAL_PROCESS=spawn``, as when rank 0 cannot fork it) or in the training loop
(``RLGEN_EVAL_PROCESS=0``), against the same run without evaluation
(``--set train.eval.every=0``). The process runs niced (``rlgen.runtime.evaluation.process``); mode
``unniced`` runs it at training's priority (``RLGEN_EVAL_NICE=0``) to show what that buys.

    .venv/bin/python benchmarks/eval_cost.py                 # the two CartPole examples, 3 runs each
    .venv/bin/python benchmarks/eval_cost.py --runs 5 --specs examples/ppo-cartpole.rl.yaml
    .venv/bin/python benchmarks/eval_cost.py --modes none,process,unniced

Evaluation never changes training (its envs and snapshots are its own), so the runs of a
spec train identically to the same stop; the difference in time is evaluation's. Medians over
``--runs`` processes of the run's clock (``run.json`` ``elapsed``, the final evaluation
included), of the whole ``rlgen run``, and of what evaluating cost rank 0's loop
(``run.json`` ``eval_s``: evaluating there, or exporting the template, writing snapshots and
waiting for results of the evaluation process). The first two are differences of noisy
totals; the third is timed where it is spent, but leaves out what the evaluation process's
CPU takes from training. Ratios only within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlgen.app.child import drawn

ROOT = Path(__file__).resolve().parent.parent
SPECS = ["examples/ppo-cartpole.rl.yaml", "examples/ppo-cartpole-ingraph.rl.yaml"]
MODES = {  # key: (label, environment, extra arguments)
    "none": ("no evaluation", {}, ["--set", "train.eval.every=0"]),
    "loop": ("evaluation in the loop", {"RLGEN_EVAL_PROCESS": "0"}, []),
    "process": ("evaluation process", {}, []),
    "unniced": ("evaluation process, training's priority", {"RLGEN_EVAL_NICE": "0"}, []),
    "spawn": ("evaluation process, started afresh", {"RLGEN_EVAL_PROCESS": "spawn"}, []),
}
DEFAULT_MODES = "none,loop,process,spawn"


def one_run(
    spec: Path, run_dir: Path, build_dir: Path, env: dict[str, str], extra: list[str]
) -> tuple[float, float, float, int]:
    """One ``rlgen run``: its clock, its whole time, evaluation's time in rank 0's loop, its env
    steps. Each mode builds into a directory of its own (a spec with ``eval.every=0`` is another
    build: sharing one directory would rebuild it, outside the clock, on every change of mode),
    and the next run starts only once this one's detached ``curves.png`` drawing has ended
    (about 1.4 s of CPU that would otherwise overlap the next run's start)."""
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--quiet", "--run-dir", str(run_dir)]
    cmd += ["--build-dir", str(build_dir), *extra]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, **env}, cwd=run_dir.parent)
    wall = time.perf_counter() - started
    doc = json.loads((run_dir / "run.json").read_text())
    drawn(run_dir / "curves.png")
    return float(doc["elapsed"]), wall, float(doc.get("eval_s", 0.0)), int(doc["env_steps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--specs", default=",".join(SPECS), help="comma-separated specs")
    parser.add_argument("--modes", default=DEFAULT_MODES, help=f"comma-separated, of {', '.join(MODES)}; none first")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if modes[0] != "none" or not set(modes) <= set(MODES):
        parser.error(f"--modes: comma-separated, starting with none, of {', '.join(MODES)}")
    with tempfile.TemporaryDirectory(prefix="rlgen-evalcost-") as tmp:
        for k, spec in enumerate(args.specs.split(",")):
            clocks: dict[str, list[float]] = {m: [] for m in modes}
            walls: dict[str, list[float]] = {m: [] for m in modes}
            in_loop: dict[str, list[float]] = {m: [] for m in modes}
            steps: set[int] = set()
            for i in range(args.runs):  # the modes interleaved, so that a noisy moment hits all of them
                for m, mode in enumerate(modes):
                    _, env, extra = MODES[mode]
                    run_dir, build_dir = Path(tmp) / f"run-{k}-{m}-{i}", Path(tmp) / f"build-{k}-{m}"
                    clock, wall, spent, n = one_run((ROOT / spec).resolve(), run_dir, build_dir, env, extra)
                    clocks[mode].append(clock)
                    walls[mode].append(wall)
                    in_loop[mode].append(spent)
                    steps.add(n)
            base_clock = statistics.median(clocks["none"])
            base_wall = statistics.median(walls["none"])
            print(f"{spec} (median of {args.runs} runs; env steps {sorted(steps)})")
            for mode in modes:
                c, w = statistics.median(clocks[mode]), statistics.median(walls[mode])
                e = statistics.median(in_loop[mode])
                print(
                    f"  {MODES[mode][0]:<40} clock {c:6.2f} s ({100 * (c / base_clock - 1):+5.1f}%)"
                    f"   whole run {w:6.2f} s ({100 * (w / base_wall - 1):+5.1f}%)"
                    f"   in rank 0's loop {e:5.2f} s ({100 * e / base_clock:4.1f}% of the clock without)"
                )


if __name__ == "__main__":
    main()
