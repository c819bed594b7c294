"""Where the time outside training goes: start-up and shut-down of `rlgen run`.

    .venv/bin/python benchmarks/startup.py                         # the two CartPole examples, 3 runs each
    .venv/bin/python benchmarks/startup.py --runs 5 --specs examples/ppo-cartpole.rl.yaml

For each spec, medians over ``--runs`` fresh processes of:

* ``whole run``: ``rlgen run SPEC --quiet`` from start to exit;
* ``training clock``: the run's own clock (``run.json`` ``elapsed``: first iteration to the end
  of training, the final evaluation included);
* ``outside``: the difference, what the user waits for besides training;

and of the parts that make it up, each timed as its own process (so each includes Python's
start, about 0.05 s):

* ``python -c 'import rlgen.cli'``: the command line's own import;
* ``rlgen validate SPEC``;
* ``rlgen build SPEC`` into a fresh directory, and again into the same one (cached: nothing
  rewritten, no formatter run);
* ``python -c 'import rlgen.runtime, tensorflow'``: TensorFlow's import as every run pays it
  (without the Keras that TensorFlow imports eagerly, see ``rlgen.runtime.tfimport``), and
  plain ``import tensorflow`` for comparison;
* drawing ``curves.png`` of the finished run (``rlgen plot``): a detached process does it once
  the run has returned, off the user's wait.

Ratios are only meaningful within one run of this script: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ["examples/ppo-cartpole.rl.yaml", "examples/ppo-cartpole-ingraph.rl.yaml"]


def timed(args: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def whole_and_clock(args: list[str], run_dir: Path, cwd: Path) -> tuple[float, float]:
    """An ``rlgen run`` process's whole time and its run's own clock (``run.json`` ``elapsed``)."""
    wall = timed(args, cwd)
    return wall, float(json.loads((run_dir / "run.json").read_text())["elapsed"])


def measure(spec: Path, runs: int, work: Path) -> dict[str, float]:
    rlgen = [sys.executable, "-m", "rlgen"]
    parts: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        parts.setdefault(name, []).append(seconds)

    for i in range(runs):
        run_dir = work / f"run-{spec.stem}-{i}"
        wall, clock = whole_and_clock([*rlgen, "run", str(spec), "--quiet", "--run-dir", str(run_dir)], run_dir, work)
        add("whole run", wall)
        add("training clock", clock)
        add("outside", wall - clock)
        add("import rlgen.cli", timed([sys.executable, "-c", "import rlgen.cli"], work))
        add("rlgen validate", timed([*rlgen, "validate", str(spec)], work))
        build = work / f"build-{spec.stem}-{i}"
        add("rlgen build (fresh)", timed([*rlgen, "build", str(spec), "-o", str(build)], work))
        add("rlgen build (cached)", timed([*rlgen, "build", str(spec), "-o", str(build)], work))
        add("import tensorflow (a run)", timed([sys.executable, "-c", "import rlgen.runtime, tensorflow"], work))
        add("import tensorflow (plain)", timed([sys.executable, "-c", "import tensorflow"], work))
        add("rlgen plot (curves.png)", timed([*rlgen, "plot", str(run_dir), "-o", str(work / "c.png")], work))
    return {name: statistics.median(values) for name, values in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--specs", default=",".join(SPECS), help="comma-separated specs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlgen-startup-") as tmp:
        for spec in args.specs.split(","):
            figures = measure((ROOT / spec).resolve(), args.runs, Path(tmp))
            print(f"{spec} (median of {args.runs} runs)")
            for name, seconds in figures.items():
                print(f"  {name:<26} {seconds:6.2f} s")


if __name__ == "__main__":
    main()
