"""What starting a distributed run costs: the launcher, then the ranks, against `single`.

    .venv/bin/python benchmarks/dist_start.py                    # 3 runs of each, CartPole example
    .venv/bin/python benchmarks/dist_start.py --runs 5 --spec benchmarks/specs/ppo-ant.rl.yaml

Two tables, each figure the median of ``--runs`` fresh processes, the rows alternating run by
run so that the machine's load falls on all of them alike:

* the launcher alone, 2 ranks on this machine: Horovod's ``horovodrun --gloo`` against
  rlgen's (``python -m rlgen.launch.hvdrun``, horovodrun without its Gloo check, see
  ``docs/policies.md``), once with ranks that do nothing (``python -c pass``) and once with
  ranks that import TensorFlow and start Horovod, as a rank's own start does;
* ``rlgen run SPEC --iterations 3 --quiet`` (evaluation off) under ``single`` and the
  distributed policies: the whole process, the run's own clock (``run.json`` ``elapsed``), and
  the time outside it, which is what starting (and ending) costs the user.

Ratios are only meaningful within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from startup import timed, whole_and_clock  # this folder's start-up benchmark (run as a script)

from rlgen.app.bench import speed_only

ROOT = Path(__file__).resolve().parent.parent
POLICIES = [("single", 1), ("actors-learner", 2), ("async-actors", 2), ("async-actors", 3), ("multi-learner", 2)]
RANK_START = "import rlgen.runtime, tensorflow, horovod.tensorflow as hvd; hvd.init()"


def launchers(runs: int, work: Path) -> dict[str, float]:
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    ours = [sys.executable, "-m", "rlgen.launch.hvdrun"]
    hosts = ["--gloo", "-np", "2", "-H", "localhost:2"]
    rows = {
        "horovodrun, ranks pass": [horovodrun, *hosts, sys.executable, "-c", "pass"],
        "rlgen.launch.hvdrun, ranks pass": [*ours, *hosts, sys.executable, "-c", "pass"],
        "horovodrun, ranks start": [horovodrun, *hosts, sys.executable, "-c", RANK_START],
        "rlgen.launch.hvdrun, ranks start": [*ours, *hosts, sys.executable, "-c", RANK_START],
    }
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(runs):
        for name, cmd in rows.items():
            times[name].append(timed(cmd, work))
    return {name: statistics.median(values) for name, values in times.items()}


def runs_of(spec: Path, runs: int, work: Path) -> dict[str, tuple[float, float]]:
    spec = speed_only(spec, work)
    times: dict[str, list[tuple[float, float]]] = {f"{p} ({w})": [] for p, w in POLICIES}
    for i in range(runs):
        for policy, workers in POLICIES:
            run_dir = work / f"{policy}-{workers}-{i}"
            cmd = [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", policy, "--iterations", "3"]
            cmd += ["--quiet", "--run-dir", str(run_dir), *(["--workers", str(workers)] if workers > 1 else [])]
            times[f"{policy} ({workers})"].append(whole_and_clock(cmd, run_dir, work))
    return {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default="examples/ppo-cartpole.rl.yaml")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlgen-dist-start-") as tmp:
        work = Path(tmp)
        print(f"launcher, 2 ranks on this machine (median of {args.runs})", flush=True)
        for name, seconds in launchers(args.runs, work).items():
            print(f"  {name:<36} {seconds:6.2f} s", flush=True)
        print(f"rlgen run {args.spec} --iterations 3, evaluation off (median of {args.runs})")
        print(f"  {'policy (workers)':<24} {'whole':>7} {'clock':>7} {'outside':>8}")
        for name, (wall, clock) in runs_of((ROOT / args.spec).resolve(), args.runs, work).items():
            print(f"  {name:<24} {wall:6.2f}s {clock:6.2f}s {wall - clock:7.2f}s")


if __name__ == "__main__":
    main()
