"""What the session's bookkeeping costs a loop of one-step iterations (SAC's and TD3's at the
RL Zoo's settings), and what it writes.

    .venv/bin/python benchmarks/session_overhead.py [--iterations 20000] [--log-every 10]

A real :class:`rlgen.runtime.session.Session` (TensorBoard on, no checkpoints) runs
``--iterations`` iterations of one env step that do no work but report two learner
metrics and, every 100 iterations, an episode. It prints the session's time per iteration
after the first 100 (``end_iteration``: the episode report, the metrics record, the
``metrics.jsonl`` row, TensorBoard) and the sizes of ``metrics.jsonl`` and the TensorBoard
events. To compare two versions, run it from each (``PYTHONPATH`` at a checkout of each)
one after the other: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

WARMUP = 100  # iterations left out: the first traces TensorBoard's writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--log-every", type=int, default=10, help="the spec's train.log.every")
    args = parser.parse_args()
    if args.iterations <= WARMUP:
        parser.error(f"--iterations: more than {WARMUP}")

    import numpy as np
    import tensorflow as tf

    from rlgen.runtime.session import RunConfig, Session

    class Agent(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(0.0)

    config = RunConfig(
        name="overhead",
        total_steps=10 * args.iterations,
        steps_per_iteration=1,
        checkpoint_every=0,
        log_every=args.log_every,
        metric_names=("loss", "q"),
    )
    metrics = np.array([0.5, 1.5], np.float32)
    with tempfile.TemporaryDirectory(prefix="rlgen-overhead-") as tmp:
        session = Session(config, tmp, max_iterations=args.iterations)
        session.attach(Agent())
        started = 0.0
        for i in session.iterations():
            if i == WARMUP:
                started = time.perf_counter()
            session.end_iteration(metrics=metrics, episodes=[(1.0, 100)] if i % 100 == 99 else [])
        seconds = time.perf_counter() - started
        session.finish()
        rows = len((Path(tmp) / "metrics.jsonl").read_text().splitlines())
        jsonl = (Path(tmp) / "metrics.jsonl").stat().st_size
        events = sum(p.stat().st_size for p in (Path(tmp) / "tensorboard").iterdir())
    per = 1e6 * seconds / (args.iterations - WARMUP)
    print(f"{args.iterations:,} one-step iterations, log.every {args.log_every}")
    print(f"  session bookkeeping     {per:8.1f} us per iteration")
    print(f"  metrics.jsonl           {rows:8,} rows, {jsonl / 1e3:,.0f} kB")
    print(f"  TensorBoard events      {events / 1e3:8,.0f} kB")


if __name__ == "__main__":
    main()
