"""Steps per second of the in-graph TF envs next to gymnasium's own vectorised envs.

Each TF env is stepped ``T`` times with random actions in a ``tf.while_loop`` inside
one ``tf.function`` (``jit_compile=True``; ``--no-jit`` for a plain graph), after a
warm-up call that traces and compiles it. gymnasium is stepped from Python with
pre-drawn random actions through ``SyncVectorEnv`` and, where the env registers one,
its NumPy-vectorised env (``vector_entry_point``), both with ``NEXT_STEP`` autoreset.
A "step" is one env advancing once (a batch step of N envs counts N).

    .venv/bin/python benchmarks/tfenv_speed.py [--envs 8 1024] [--seconds 1.0]
        [--ids CartPole-v1 ...] [--dtype float64 float32] [--no-jit] [--threads INTER INTRA]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gymnasium as gym  # noqa: E402
import tensorflow as tf  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from rlgen.runtime.tfenvs import TF_ENVS, make_tf_env  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402


def random_actions(env, seed: tf.Tensor, alg: str) -> tf.Tensor:
    """A batch of uniformly random actions for ``env`` from a stateless seed.

    Drawn as floats and floored for discrete actions: on XLA CPU this is several times
    cheaper than ``stateless_uniform(dtype=int32)`` with the default algorithm, which
    would cost more than the env step itself.
    """
    n = env.num_envs
    if env.num_actions is not None:
        u = tf.random.stateless_uniform([n], seed, alg=alg)
        return tf.minimum(tf.cast(u * env.num_actions, tf.int32), env.num_actions - 1)
    space = env.single_action_space
    return tf.random.stateless_uniform([n, env.action_size], seed, float(space.low[0]), float(space.high[0]), alg=alg)


def tf_speed(env_id: str, n: int, seconds: float, dtype: str, jit: bool) -> tuple[float, float]:
    """(steps/s, seconds of the first call) of ``env_id`` with ``n`` envs in a while loop."""
    env = make_tf_env(env_id, n, seed=0, dtype=dtype)
    env.reset()

    @tf.function(jit_compile=jit)
    def rollout(steps: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            action = random_actions(env, tf.stack([i, tf.constant(7)]), "threefry" if jit else "philox")
            _, reward, _, _ = env.step(action)
            return i + 1, total + tf.reduce_sum(reward)

        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), tf.constant(0.0)))[1]

    t0 = time.perf_counter()
    rollout(tf.constant(10)).numpy()
    first = time.perf_counter() - t0
    steps = 100
    while True:  # grow the loop until one call takes about a quarter of the budget
        t0 = time.perf_counter()
        rollout(tf.constant(steps)).numpy()
        dt = time.perf_counter() - t0
        if dt > seconds / 4 or steps >= 1 << 22:
            break
        steps = int(steps * min(16.0, max(2.0, seconds / 4 / max(dt, 1e-6))))
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        rollout(tf.constant(steps)).numpy()
        reps += 1
    return reps * steps * n / (time.perf_counter() - t0), first


def gym_speed(env_id: str, n: int, seconds: float, mode: str) -> float | None:
    """steps/s of gymnasium's ``mode`` ("sync" or "vector_entry_point") vector env, None if it has none."""
    if mode == "vector_entry_point" and gym.spec(env_id).vector_entry_point is None:
        return None
    if mode == "sync":
        env = gym.make_vec(env_id, n, "sync", vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP})
    else:
        env = gym.make_vec(env_id, n, "vector_entry_point")
    env.reset(seed=0)
    env.action_space.seed(1)
    actions = [env.action_space.sample() for _ in range(64)]
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for a in actions[:8]:
            env.step(a)
        steps += 8
        actions.append(actions.pop(0))
    rate = steps * n / (time.perf_counter() - t0)
    env.close()
    return rate


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 1024])
    parser.add_argument("--ids", nargs="+", default=list(TF_ENVS))
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per cell")
    parser.add_argument("--dtype", nargs="+", default=["float64", "float32"], help="TF physics dtypes")
    parser.add_argument("--no-jit", action="store_true", help="plain tf.function graphs instead of XLA")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 1), metavar=("INTER", "INTRA"))
    args = parser.parse_args()
    configure_threads(*args.threads)

    tf_cols = [f"tf {d}" for d in args.dtype]
    header = ["env", "N", *tf_cols, "gym sync", "gym vector", "compile s"]
    rows = []
    for env_id in args.ids:
        for n in args.envs:
            tf_rates, compile_s = [], []
            for d in args.dtype:
                rate, first = tf_speed(env_id, n, args.seconds, d, not args.no_jit)
                tf_rates.append(rate)
                compile_s.append(first)
            sync = gym_speed(env_id, n, args.seconds, "sync")
            vec = gym_speed(env_id, n, args.seconds, "vector_entry_point")
            rows.append([env_id, str(n), *map(fmt, tf_rates), fmt(sync), fmt(vec), f"{max(compile_s):.1f}"])
            print("  ".join(rows[-1]), flush=True)
    mode = "XLA (jit_compile=True)" if not args.no_jit else "tf.function graph (no XLA)"
    print(f"\nsteps/s; TF envs: tf.while_loop in one {mode} call, random actions; gymnasium: NEXT_STEP autoreset")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
