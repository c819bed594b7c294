"""Steps per second of the in-graph simple_spread (TFSpread) next to mpe2's own, in one run.

TFSpread: ``B`` env copies stepped 25 times with random actions in a ``tf.while_loop``
inside one ``tf.function`` (``jit_compile=True``), one call per 25-step rollout, after a
warm-up call that compiles it. mpe2: one ``simple_spread_v3.parallel_env`` stepped from
Python with random actions (drawn beforehand), reset by hand when its episode ends.
A "step" is one env copy advancing once (all N agents acting); agent-steps are N times as many.

    .venv/bin/python benchmarks/mpe_spread_speed.py [--envs 128 1024] [--seconds 2.0]
        [--agents 3] [--dtype float64 float32] [--threads INTER INTRA]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from rlgen.runtime.mpe.tf_spread import TFSpread  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

ROLLOUT = 25


def tf_speed(b: int, n: int, seconds: float, dtype: str) -> tuple[float, float]:
    """(env steps/s, seconds of the first call) of TFSpread with ``b`` copies, 25-step compiled rollouts."""
    env = TFSpread(b, N=n, seed=0, dtype=dtype)
    env.reset()

    @tf.function(jit_compile=True)
    def rollout(seed: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            u = tf.random.stateless_uniform([env.num_rows], tf.stack([seed, i]), alg="threefry")
            _, reward, _, _ = env.step(tf.minimum(tf.cast(u * 5, tf.int32), 4))
            return i + 1, total + tf.reduce_sum(reward)

        return tf.while_loop(lambda i, _: i < ROLLOUT, body, (tf.constant(0), tf.constant(0.0)))[1]

    t0 = time.perf_counter()
    rollout(tf.constant(0)).numpy()
    first = time.perf_counter() - t0
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        calls += 1
        rollout(tf.constant(calls)).numpy()
    return calls * ROLLOUT * b / (time.perf_counter() - t0), first


def mpe2_speed(n: int, seconds: float) -> float:
    """env steps/s of one mpe2 ``simple_spread_v3.parallel_env`` under random actions."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=n, max_cycles=ROLLOUT)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 5, (4096, n)).tolist()
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for row in actions[: 256 if steps else 16]:
            if not env.agents:
                env.reset()
            env.step(dict(zip(env.possible_agents, row, strict=True)))
            steps += 1
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    parser.add_argument("--threads", type=int, nargs=2, metavar=("INTER", "INTRA"), default=None)
    args = parser.parse_args()
    if args.threads:
        configure_threads(*args.threads)
    n = args.agents
    print(f"simple_spread N={n}, env steps/s (agent-steps/s = {n} x), {args.seconds:.1f} s each")
    ref = mpe2_speed(n, args.seconds)
    print(f"{'mpe2 parallel_env, 1 env':34s} {ref:12,.0f}")
    for dtype in args.dtype:
        for b in args.envs:
            rate, first = tf_speed(b, n, args.seconds, dtype)
            label = f"TFSpread B={b} {dtype} (XLA)"
            print(f"{label:34s} {rate:12,.0f}   {rate / ref:8.1f}x mpe2   first call {first:.2f} s")


if __name__ == "__main__":
    main()
