"""How long `rlgen validate` takes on every example, in-process and as a fresh command.

    .venv/bin/python benchmarks/validate_speed.py

Prints per-example and total times (median of 5 in-process runs, after one warm-up
that pays for imports), the cold command time, and confirms no TensorFlow import.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.rl.yaml"))


def main() -> None:
    start = time.perf_counter()
    from rlgen.api import validate_file

    import_s = time.perf_counter() - start
    for e in EXAMPLES:  # warm-up: schema compile, gymnasium not needed for known envs
        validate_file(e)
    print(f"import rlgen.api: {import_s * 1000:.0f} ms")
    total = []
    for e in EXAMPLES:
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            r = validate_file(e)
            runs.append(time.perf_counter() - t)
        assert r.ok, e
        total.append(statistics.median(runs))
        print(f"{e.name:32s} {statistics.median(runs) * 1000:7.1f} ms")
    print(f"{'all examples (in-process)':32s} {sum(total) * 1000:7.1f} ms")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlgen", "validate", "-q", *map(str, EXAMPLES)], check=True)
    print(f"{'rlgen validate examples/* (cold)':32s} {(time.perf_counter() - t) * 1000:7.1f} ms")
    print("tensorflow imported:", "tensorflow" in sys.modules, "| horovod imported:", "horovod" in sys.modules)


if __name__ == "__main__":
    main()
