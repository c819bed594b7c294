"""What a SAC gradient step costs the small calls that follow it: the env step and the actor call.

    nice -n 5 .venv/bin/python benchmarks/after_update.py [--env HalfCheetah-v5] [--calls 300]
        [--threads INTER INTRA] [--per-call 1,2,4,8] [--rounds 5]

At the RL Zoo's one gradient step per env step (``benchmarks/sac_speed.py --settings 1``),
rlgen's time per env step outside the update (acting, stepping, storing, bookkeeping) is
several times what the same calls take in a loop of their own. This measures why, with the
runtime's own pieces (``SACLearner`` with SB3's HalfCheetah shapes: [256, 256] ReLU actor and
twin critics, batch 256, one gradient step per call; the compiled actor; the gymnasium env):
the mean time of each small call over ``--calls`` calls, made back to back, and made right
after a gradient step. Then the same after the gradient step and a pause (``--pause`` ms): a
cost that a pause does not remove is not the update's threads still running (they would be
done) but state the update evicted (caches, TLBs, branch predictors) being fetched again.

Stable-Baselines3 pays the same kind of cost (its collection after each ``train()`` call;
``sac_speed.py`` prints both sides).

Last, what a call costs beyond its gradient steps: the time per call and per gradient step
when ``K`` steps share one compiled call (``--per-call``; the K minibatches are copies of one,
since dense arithmetic does not depend on the values), the sizes taken in turn for
``--rounds`` rounds, medians over rounds. ``later steps`` is the slope between the smallest
and the largest K; ``first step`` is the one-step call; their difference is what each call
pays once (launching the program, its buffers and variables, waking the intra-op threads,
warming the caches). One env step per gradient step (the Zoo's ``train_freq 1``) pays it at
every step: the next action needs the updated weights, so those calls cannot be merged.

Then where that cost sits: one gradient step and one env step at a time, in turn, driven
three ways. ``eager``: the update's ``tf.function`` called from Python with tensors, the env
stepped in Python. ``generated``: what a generated loop does, the update as the
``BoundStep`` that ``@compiled`` makes of it, called with the NumPy minibatch (through
``numpy_caller``'s fast path). ``graph loop``: one call of a graph ``tf.while_loop`` (no XLA at
its level) whose body launches the same compiled update and then steps the env through
``tf.numpy_function``, ``--graph-steps`` iterations per call. All do the same work in the
same order; a difference is the cost of coming back to Python for every gradient step. The
graph loop beats ``eager`` by much more than it beats ``generated`` (one run: 11.80, 10.05
and 9.53 ms a pair); built into the generated code, it did not pay (docs/notes/sac-speed.md).

Figures vary with the machine's load: compare within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgen.runtime.tfutil import configure_threads  # noqa: E402


def mean_ms(call: Callable[[], object], calls: int, before: Callable[[], object] | None = None) -> tuple[float, float]:
    """Mean wall time and process CPU time of ``call`` over ``calls`` calls, in ms, ``before``
    (untimed) ahead of each."""
    wall = cpu = 0.0
    for _ in range(calls):
        if before is not None:
            before()
        started, cpu_started = time.perf_counter(), time.process_time()
        call()
        wall += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
    return 1e3 * wall / calls, 1e3 * cpu / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pause", type=float, default=2.0, help="ms between the gradient step and the call")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 2), metavar=("INTER", "INTRA"))
    parser.add_argument("--per-call", default="1,2,4,8", help="gradient steps per call to compare (comma-separated)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds over the --per-call sizes (medians)")
    parser.add_argument("--graph-steps", type=int, default=20, help="iterations per call of the graph loop")
    args = parser.parse_args()
    configure_threads(*args.threads)

    import gymnasium as gym
    import numpy as np

    from rlgen.algorithms.sac.config import SACConfig
    from rlgen.algorithms.sac.learner import SACLearner
    from rlgen.runtime.continuous import QCritic, SquashedGaussianActor, make_compiled_actor
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.policies import ActionSpec

    env = gym.make(args.env)
    obs, _ = env.reset(seed=0)
    obs_shape = tuple(env.observation_space.shape)
    spec = ActionSpec.from_space(env.action_space)
    dim, obs_size = spec.num_outputs, int(np.prod(obs_shape))
    net = {"kind": "mlp", "hidden": [256, 256], "activation": "relu", "init": "glorot_uniform"}
    critic = QCritic([build_network(net, (obs_size + dim,), 1, 1.0, seed=i + 1) for i in range(2)])
    actor = SquashedGaussianActor(build_network(net, obs_shape, 2 * dim, 1.0, seed=0), spec, seed=0)
    learner = SACLearner(actor, critic, SACConfig(lr=3e-4), obs_shape)
    acting = make_compiled_actor(actor, obs_shape, jit_compile=True)

    rng = np.random.default_rng(0)
    batch = (
        rng.normal(size=(1, 256, obs_size)).astype(np.float32),
        rng.uniform(-1, 1, (1, 256, dim)).astype(np.float32),
        rng.normal(size=(1, 256)).astype(np.float32),
        rng.normal(size=(1, 256, obs_size)).astype(np.float32),
        np.zeros((1, 256), np.float32),
    )
    one_obs = np.asarray(obs, np.float32)[None]
    action = env.action_space.sample()

    def update() -> None:
        learner.update(batch)

    def update_and_pause() -> None:
        learner.update(batch)
        time.sleep(args.pause / 1e3)

    def step_env() -> None:
        if env.step(action)[2]:
            env.reset()

    def act() -> None:
        acting(one_obs)

    for _ in range(20):  # traced, compiled and warm
        update()
        act()
        step_env()
    inter, intra = args.threads
    print(f"{args.env}, SAC shapes (batch 256, [256, 256]), threads: {inter} inter-op, {intra} intra-op")
    print(f"  gradient step              {mean_ms(update, args.calls)[0]:7.3f} ms")
    print("                             back to back   after a gradient step   after one and a pause")
    for name, call in (("env step", step_env), ("actor call", act)):
        alone = mean_ms(call, args.calls)[0]
        after = mean_ms(call, args.calls, update)[0]
        paused = mean_ms(call, args.calls, update_and_pause)[0]
        print(f"  {name:<25}{alone:9.3f} ms {after:15.3f} ms {paused:21.3f} ms")

    steps_per_call(learner, batch, sorted({int(k) for k in args.per_call.split(",")}), args.calls, args.rounds)
    graph_loop_vs_eager(learner, batch, step_env, args.graph_steps, args.rounds)


def steps_per_call(learner: Any, batch: tuple[Any, ...], sizes: list[int], calls: int, rounds: int) -> None:
    """Print the time per call and per gradient step when K gradient steps share one call."""
    import numpy as np

    stacks = {k: tuple(np.repeat(x, k, axis=0) for x in batch) for k in sizes}
    for k in sizes:  # each K is its own compiled program
        learner.update(stacks[k])
    runs: dict[int, list[tuple[float, float]]] = {k: [] for k in sizes}
    for _ in range(rounds):
        for k in sizes:
            runs[k].append(mean_ms(lambda k=k: learner.update(stacks[k]), max(2, calls // (rounds * k))))
    wall = {k: statistics.median(w for w, _ in runs[k]) for k in sizes}
    print("  gradient steps per call    per call   per gradient step   CPU per gradient step")
    for k in sizes:
        cpu = statistics.median(c for _, c in runs[k])
        print(f"  {k:<25}{wall[k]:9.3f} ms {wall[k] / k:13.3f} ms {cpu / k:19.3f} ms")
    if len(sizes) > 1 and sizes[0] == 1:
        later = (wall[sizes[-1]] - wall[1]) / (sizes[-1] - 1)
        once = wall[1] - later
        print(f"  first step of a call {wall[1]:.3f} ms, later steps {later:.3f} ms: each call pays {once:.3f} ms")


def graph_loop_vs_eager(
    learner: Any, batch: tuple[Any, ...], step_env: Callable[[], object], steps: int, rounds: int
) -> None:
    """Print the time per (gradient step + env step) driven from Python and from a graph loop."""
    import numpy as np
    import tensorflow as tf

    from rlgen.runtime.steps import BoundStep

    tensors = [tf.constant(x) for x in batch]
    progress = tf.constant(0.0)
    signature = [tf.TensorSpec(x.shape, tf.float32) for x in batch] + [tf.TensorSpec([], tf.float32)]
    # the update as a generated fragment holds it (rlgen.runtime.steps: what @compiled makes)
    fast = BoundStep(tf.function(learner.update_fn, input_signature=signature, autograph=False), True)

    def host_env_step() -> np.ndarray:
        step_env()
        return np.zeros((), np.float32)

    def loop(n: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor) -> tuple[tf.Tensor]:
            metrics = learner.update_fn(*tensors, progress)
            with tf.control_dependencies([metrics]):
                done = tf.numpy_function(host_env_step, [], tf.float32, stateful=True)
            with tf.control_dependencies([done]):
                return (i + 1,)

        return tf.while_loop(lambda i: i < n, body, (tf.constant(0),))[0]

    graph = tf.function(loop, input_signature=[tf.TensorSpec([], tf.int32)], autograph=False)
    count = tf.constant(steps)
    graph(tf.constant(1))  # traced

    def eager() -> None:
        for _ in range(steps):
            learner.update_fn(*tensors, progress).numpy()
            step_env()

    def generated() -> None:
        for _ in range(steps):
            fast(*batch, 0.0)
            step_env()

    generated()  # traced
    times: dict[str, list[float]] = {"eager": [], "generated": [], "graph loop": []}
    for _ in range(rounds):
        times["eager"].append(mean_ms(eager, 1)[0] / steps)
        times["generated"].append(mean_ms(generated, 1)[0] / steps)
        times["graph loop"].append(mean_ms(lambda: graph(count).numpy(), 1)[0] / steps)
    print(f"  one gradient step + one env step, {steps} per call of the graph loop (medians of {rounds}):")
    for name, values in times.items():
        print(f"  {name:<25}{statistics.median(values):9.3f} ms")


if __name__ == "__main__":
    main()
