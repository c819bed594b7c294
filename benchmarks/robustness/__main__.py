"""The command line: ``python -m benchmarks.robustness [--only ...]`` from the repository root
(the package's docstring says what it does); the sections in order, then every figure and
every failed property."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import __doc__ as ABOUT
from .common import RLGEN, ROOT, Report
from .faults import faults
from .fuzz import fuzz, make_mutants
from .hostile import hostile

SECTIONS = ("fuzz", "hostile", "faults")


def git_commit() -> str:
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    return r.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "") if r.returncode == 0 else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.robustness", description=ABOUT.splitlines()[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--mutants", type=int, default=400, help="mutants to validate and build (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="the mutants' seed (default 1)")
    parser.add_argument("--run-sample", type=int, default=20, help="mutants valid under single to run (default 20)")
    parser.add_argument("--run-timeout", type=float, default=240, help="seconds one mutant's run may take")
    parser.add_argument("--kills", type=int, default=3, help="runs whose rank 1 is killed (default 3)")
    parser.add_argument("--faults", default="", help="only these faults, comma-separated (default: all)")
    parser.add_argument("--dump", type=int, metavar="I", help="print mutant I of --seed's sequence and exit")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (its path is printed)")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # each section's lines as they come, into a file too
    if args.dump is not None:
        edits, text = make_mutants(args.seed, args.dump + 1)[args.dump]
        print(f"# mutant {args.dump}, seed {args.seed}: {edits}", file=sys.stderr)
        sys.stdout.write(text)
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if bad := [s for s in only if s not in SECTIONS]:
        parser.error(f"unknown section(s) {', '.join(bad)}: choose from {', '.join(SECTIONS)}")
    import rlgen

    shown = ["--only", ",".join(only)]
    if "fuzz" in only:
        shown += ["--mutants", str(args.mutants), "--seed", str(args.seed), "--run-sample", str(args.run_sample)]
    if "faults" in only:
        shown += ["--kills", str(args.kills)] + (["--faults", args.faults] if args.faults else [])
    print(f"command: python -m benchmarks.robustness {shlex.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"settings: {shlex.join(shown)}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}; rlgen {rlgen.__version__} at {Path(rlgen.__file__).parent} "
          f"(commit {git_commit()}); {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    if not RLGEN.exists():
        print(f"the installed rlgen command is missing ({RLGEN}): pip install -e . first", file=sys.stderr)
        return 2
    report = Report()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rlgen-fuzz-faults-"))
    try:
        for section in SECTIONS:
            if section in only:
                {"fuzz": fuzz, "hostile": hostile, "faults": faults}[section](args, work, report)
    finally:
        if args.keep:
            print(f"\nwork directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - started
    report.figure("seconds", f"{total:.0f}")
    report.figure("properties_failed", len(report.failed))
    print("\n== figures\n")
    for name, value in report.figures:
        print(f"{name}: {value}")
    if report.failed:
        print("\nfailed:")
        for what in report.failed:
            print(f"  {what}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
