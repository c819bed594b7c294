"""How long `rlgen build` takes on every example and policy it supports (in-process).

    .venv/bin/python benchmarks/build_speed.py

Prints the median of 5 builds per case (rendering, formatting with ruff when installed,
writing), and confirms that TensorFlow and Horovod were not imported.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.rl.yaml"))
POLICIES = {"single": 1, "actors-learner": 3, "central-inference": 3, "multi-learner": 2}


def main() -> None:
    start = time.perf_counter()
    from rlgen.api import build_file
    from rlgen.codegen.build import BuildError

    print(f"import rlgen.codegen.build: {(time.perf_counter() - start) * 1000:.0f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        for example in EXAMPLES:
            for policy, workers in POLICIES.items():
                runs = []
                for i in range(5):
                    t = time.perf_counter()
                    try:
                        result, done = build_file(
                            example, Path(tmp) / f"{example.stem}-{policy}-{i}", policy=policy, workers=workers
                        )
                    except BuildError as exc:
                        print(f"{example.name:28s} {policy:18s} not built: {str(exc)[:60]}")
                        break
                    runs.append(time.perf_counter() - t)
                    if done is None:
                        break
                if runs and done is not None:
                    print(f"{example.name:28s} {policy:18s} {statistics.median(runs) * 1000:7.1f} ms")
                elif runs:
                    print(f"{example.name:28s} {policy:18s} invalid with {workers} workers")
    print("tensorflow imported:", "tensorflow" in sys.modules, "| horovod imported:", "horovod" in sys.modules)


if __name__ == "__main__":
    main()
