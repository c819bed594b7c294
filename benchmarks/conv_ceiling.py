"""How fast can a PPO Breakout update be on this CPU? The work an iteration holds, and what
the CPU does per second, side by side.

Work: the Nature CNN at ``[4, 84, 84]`` counted layer by layer in multiply-adds (a
convolution's output pixels x filters x kernel area x input channels; a dense layer's
inputs x outputs), two FLOPs each. A training sample costs its forward pass, the gradient
of every layer's weights (as many FLOPs as the forward) and the gradient of every layer's
input but the first's. A PPO iteration with the RL Zoo's Atari settings trains 4 epochs
over 1,024 samples and acts on 1,024.

Speed, measured in this process with TensorFlow on ``--threads`` intra-op threads:

* ``matmul``: a square float32 matrix product of ``--matmul`` rows, the best the CPU's
  BLAS reaches (the practical ceiling: a convolution does not run faster per FLOP);
* ``train step``: one PPO-shaped gradient step of the Nature CNN on a minibatch of 256
  uint8 frames (the policy and value heads on one torso, one forward pass), as rlgen's
  learner runs it (TensorFlow's kernels, no XLA).

Then, for a target of ``--target`` x another trainer's env steps/s (``--other``, e.g. SB3's
from ``benchmarks/pixels.py --sb3-python``) with ``--rest`` seconds an iteration outside the
update (acting and env stepping, from the same output), it prints the FLOP rate the update
would need, against the two measured.

    .venv/bin/python benchmarks/conv_ceiling.py [--other 245.0 --rest 1.1 --target 2]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgen.dsl.images import conv_out  # noqa: E402
from rlgen.runtime.convnets import NATURE_LAYERS  # noqa: E402

OBS = (4, 84, 84)
ACTIONS = 4  # Breakout's
ITERATION = 1024  # env steps of an iteration: 8 envs x 128 steps
EPOCHS = 4
MINIBATCH = 256


def layer_macs(obs: tuple[int, int, int] = OBS, dense: int = 512, heads: int = ACTIONS + 1) -> list[int]:
    """Multiply-adds of each layer of the Nature CNN for one sample."""
    c, h, w = obs
    macs = []
    for filters, kernel, stride in NATURE_LAYERS:
        h, w = conv_out(h, kernel, stride, "VALID"), conv_out(w, kernel, stride, "VALID")
        macs.append(h * w * filters * kernel * kernel * c)
        c = filters
    macs += [h * w * c * dense, dense * heads]
    return macs


def flops_per_sample(macs: list[int]) -> tuple[float, float]:
    """(forward, training) FLOPs of one sample: training adds every weight gradient and the
    input gradient of every layer but the first."""
    forward = 2.0 * sum(macs)
    return forward, forward + forward + (forward - 2.0 * macs[0])


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm up (and trace)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(threads: int, size: int, repeats: int) -> tuple[float, float]:
    """(matmul GFLOP/s, train step seconds) with TensorFlow on ``threads`` intra-op threads."""
    import numpy as np
    import tensorflow as tf

    from rlgen.runtime.convnets import ConvNet
    from rlgen.runtime.policies import ActionSpec, Policy, Value, distribution_and_value
    from rlgen.runtime.tfutil import configure_threads

    configure_threads(1, threads)
    rng = np.random.default_rng(0)
    a = tf.constant(rng.standard_normal((size, size)), tf.float32)
    matmul = tf.function(lambda: tf.linalg.matmul(a, a))
    gflops = 2.0 * size**3 / best_seconds(lambda: matmul().numpy(), repeats) / 1e9

    net = ConvNet(OBS, [ACTIONS, 1], output_gain=[0.01, 1.0], seed=0)
    policy, value = Policy(net, ActionSpec(n=ACTIONS), outputs=(0, ACTIONS)), Value(net, output=ACTIONS)
    frames = tf.constant(rng.integers(0, 256, (MINIBATCH, *OBS), dtype=np.uint8))
    actions = tf.constant(rng.integers(0, ACTIONS, MINIBATCH), tf.int32)
    variables = net.trainable_variables

    @tf.function(jit_compile=False)
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            dist, values = distribution_and_value(policy, value, frames)
            loss = -tf.reduce_mean(dist.log_prob(actions)) - 0.01 * tf.reduce_mean(dist.entropy())
            loss += 0.5 * tf.reduce_mean(tf.square(values))
        for v, g in zip(variables, tape.gradient(loss, variables), strict=True):
            v.assign_sub(1e-6 * g)
        return loss

    return gflops, best_seconds(lambda: step().numpy(), repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--matmul", type=int, default=2048, help="rows of the square matrix product")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls of each; the fastest counts")
    ap.add_argument("--other", type=float, default=245.0, help="the other trainer's env steps/s")
    ap.add_argument("--rest", type=float, default=1.1, help="seconds an iteration outside the update")
    ap.add_argument("--target", type=float, default=2.0, help="the multiple of --other to reach")
    args = ap.parse_args()

    macs = layer_macs()
    forward, train = flops_per_sample(macs)
    update = EPOCHS * ITERATION * train
    print(f"Nature CNN at {list(OBS)}: {forward / 1e6:.1f} MFLOP forward, {train / 1e6:.1f} MFLOP a training sample")
    print(
        f"PPO iteration (Zoo: {EPOCHS} epochs x {ITERATION} samples, minibatch {MINIBATCH}): "
        f"update {update / 1e9:.0f} GFLOP, acting {ITERATION * forward / 1e9:.0f} GFLOP"
    )
    gflops, step = measure(args.threads, args.matmul, args.repeats)
    step_rate = MINIBATCH * train / step / 1e9
    steps = EPOCHS * ITERATION // MINIBATCH
    print(f"measured, {args.threads} thread(s): matmul {args.matmul}^3 {gflops:.0f} GFLOP/s")
    print(
        f"measured: train step of {MINIBATCH} frames {step * 1e3:.0f} ms = {step_rate:.0f} GFLOP/s "
        f"({step_rate / gflops:.0%} of the matmul's); an update of {steps} steps {steps * step:.2f} s"
    )
    budget = ITERATION / (args.target * args.other) - args.rest
    if budget <= 0:
        print(f"{args.target}x {args.other} env steps/s leaves no time for the update after {args.rest} s of the rest")
        return
    need = update / budget / 1e9
    print(
        f"{args.target}x {args.other} env steps/s = {args.target * args.other:.0f}: an iteration in "
        f"{ITERATION / (args.target * args.other):.2f} s, the update in {budget:.2f} s after {args.rest} s of the "
        f"rest: {need:.0f} GFLOP/s, {need / gflops:.2f}x the matmul's, {need / step_rate:.2f}x the train step's"
    )


if __name__ == "__main__":
    main()
