"""What one epoch of recurrent MAPPO's update costs in its GRU: the forward and backward pass of
one ``runtime.recurrent.GRU`` over a minibatch of chunks, as ``tf.scan`` (what
``GRU.unroll`` does) and with the steps written out (a Python loop traced into the graph), each
compiled with and without XLA, side by side in one process.

The default shape is the rmappo example's: 1,152 chunks of 10 steps (128 copies x 3 agents x 3
chunks of a 26-row rollout), a GRU of 64 over 64 features, about 5% of rows starting an episode.
The loss is the sum of squares of every state, so the backward pass runs through every step.
It prints ms per pass (the mean of ``--repeats`` after one warm-up call), the work in FLOPs and
the rate, and checks that the two unrolls give the same states.

    .venv/bin/python benchmarks/gru_unroll.py [--steps 10] [--sequences 1152] [--size 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rlgen.runtime import tfimport

tfimport.install()  # TensorFlow's import without its native log lines, as an rlgen rank's

import tensorflow as tf  # noqa: E402

from rlgen.runtime.recurrent import GRU  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402


def unrolled(gru: GRU, x: tf.Tensor, h0: tf.Tensor, first: tf.Tensor) -> tf.Tensor:
    """``GRU.unroll``'s states with its steps written out (the length is static): ``GRU.step``
    a step, the input half included (the same FLOPs as one product over every step)."""
    h, states = h0, []
    for t in range(x.shape[0]):
        h = gru.step(x[t], h, first[t])
        states.append(h)
    return tf.stack(states)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="steps per chunk (the example's chunk: 10)")
    ap.add_argument("--sequences", type=int, default=1152, help="chunks per minibatch (default 1152)")
    ap.add_argument("--size", type=int, default=64, help="GRU units and input features (default 64)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (rlgen's MAPPO ranks run 1)")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    # TensorFlow's native lines (XLA's compile cache logs every program it loads) are dropped
    # unless the benchmark fails, as a run keeps them out of the terminal
    with tfimport.native_stderr_aside(None):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    configure_threads(args.threads, 1)
    rng = np.random.default_rng(0)
    gru = GRU(args.size, args.size, rng)
    shape = (args.steps, args.sequences)
    x = tf.constant(rng.normal(size=(*shape, args.size)).astype(np.float32))
    first = tf.constant(rng.random(shape) < 0.05)
    h0 = tf.zeros([args.sequences, args.size])
    ways = {"tf.scan": lambda: gru.unroll(x, h0, first)[0], "written out": lambda: unrolled(gru, x, h0, first)}
    np.testing.assert_allclose(ways["tf.scan"]().numpy(), ways["written out"]().numpy(), rtol=1e-5, atol=1e-6)
    rows = args.steps * args.sequences
    # forward: the input half (one matmul) and the recurrent half (a matmul a step), 2 FLOPs a
    # multiply-add; backward: twice the forward (gradients of the weights and of the inputs)
    flops = 3 * 2 * (rows * args.size * 3 * args.size) * 2
    print(f"GRU of {args.size} over [{args.steps}, {args.sequences}, {args.size}]: {flops / 1e9:.2f} GFLOP a pass")
    print(f"{'unroll':<12} {'XLA':<4} {'ms/pass':>8} {'GFLOP/s':>8}")
    for name, states in ways.items():
        for jit in (True, False):

            @tf.function(jit_compile=jit, autograph=False)
            def grads(states=states) -> list[tf.Tensor]:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.square(states()))
                return tape.gradient(loss, gru.trainable_variables)

            [g.numpy() for g in grads()]  # trace and compile
            t0 = time.perf_counter()
            for _ in range(args.repeats):
                out = grads()
            [g.numpy() for g in out]
            ms = (time.perf_counter() - t0) / args.repeats * 1000
            print(f"{name:<12} {'yes' if jit else 'no':<4} {ms:>8.1f} {flops / ms / 1e6:>8.1f}")


if __name__ == "__main__":
    main()
