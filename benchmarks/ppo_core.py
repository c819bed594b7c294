"""Hand-wired single-process PPO on CartPole-v1 from the runtime's pieces.

RL Zoo hyper-parameters (8 envs, n_steps 32, minibatch 256, 20 epochs, gamma 0.98,
GAE lambda 0.8, lr and clip linear to 0, [64, 64] tanh, 100k steps). Reports wall
time to a mean return of 475 over the last 100 episodes and where the time goes.

    .venv/bin/python benchmarks/ppo_core.py [--seed 0] [--steps 100000] [--stop]
        [--xla-cache DIR] [--no-jit] [--threads INTER INTRA] [--json]

"wall" runs from the first ``env.reset()``; "build" (networks, envs, tracing the two
compiled functions) comes before it. XLA compiles at the first call of each function,
inside the wall time, unless ``--xla-cache`` holds the executables of an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("RLGEN_XLA_CACHE", "0")  # first calls compile unless --xla-cache names a cache


from rlgen.runtime.tfimport import enable_xla_cache  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402


@dataclass
class Timers:
    """Seconds spent per part of the loop ("first calls": the first inference and update
    calls, which trace-compile with XLA; the other parts exclude them)."""

    parts: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("first calls", "inference", "env", "buffer", "update"), 0.0)
    )

    def report(self, wall: float) -> str:
        other = wall - sum(self.parts.values())
        items = [*self.parts.items(), ("other", other)]
        return ", ".join(f"{k} {v:.2f} s ({100 * v / wall:.0f}%)" for k, v in items)


def train(
    seed: int = 0,
    total_steps: int = 100_000,
    stop_at_target: bool = False,
    target: float = 475.0,
    jit_compile: bool = True,
    verbose: bool = True,
) -> dict[str, float]:
    """Train PPO on CartPole-v1; returns the run's figures."""
    from rlgen.algorithms.ppo.config import PPOConfig
    from rlgen.algorithms.ppo.learner import PPOLearner
    from rlgen.runtime.buffers import RolloutBuffer
    from rlgen.runtime.envs import VectorEnv
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.optim import Linear
    from rlgen.runtime.policies import ActionSpec, Policy, Value, make_act_and_value

    t_build = time.perf_counter()
    num_envs, n_steps = 8, 32
    env = VectorEnv("CartPole-v1", num_envs, seed=seed)
    obs_shape = env.observation_space.shape
    spec = ActionSpec.from_space(env.action_space)
    net = {"kind": "mlp", "hidden": [64, 64], "activation": "tanh"}
    policy = Policy(build_network(net, obs_shape, spec.num_outputs, 0.01, seed=seed), spec, seed=seed)
    value = Value(build_network(net, obs_shape, 1, 1.0, seed=seed + 1))
    config = PPOConfig(
        lr=Linear(1e-3, 0.0),
        clip=Linear(0.2, 0.0),
        gamma=0.98,
        gae_lambda=0.8,
        epochs=20,
        minibatch=256,
        ent_coef=0.0,
        jit_compile=jit_compile,
    )
    learner = PPOLearner(policy, value, config, n_steps, num_envs, obs_shape, seed=seed)
    act = make_act_and_value(policy, value, obs_shape, jit_compile=jit_compile)
    buffer = RolloutBuffer(n_steps, num_envs, obs_shape, (), spec.np_dtype)
    build_time = time.perf_counter() - t_build

    timers = Timers().parts
    clock = time.perf_counter
    start = clock()
    obs = env.reset()
    steps, iteration, calls, time_to_target, steps_to_target = 0, 0, 0, float("nan"), 0
    while steps < total_steps:
        for _ in range(n_steps):
            t0 = clock()
            action, logp, v = act(obs)
            t1 = clock()
            next_obs, reward, terminated, truncated = env.step(action)
            t2 = clock()
            buffer.insert(obs, action, reward, terminated, truncated, logp, v)
            t3 = clock()
            timers["inference" if iteration or calls else "first calls"] += t1 - t0
            calls += 1
            timers["env"] += t2 - t1
            timers["buffer"] += t3 - t2
            obs = next_obs
        steps += n_steps * num_envs
        t0 = clock()
        metrics = learner.update(buffer, obs, steps / total_steps)
        timers["update" if iteration else "first calls"] += clock() - t0
        iteration += 1
        mean_return = env.mean_return()
        if steps_to_target == 0 and len(env.episode_returns) >= 1 and mean_return >= target:
            time_to_target, steps_to_target = clock() - start, steps
            if verbose:
                print(f"reached {target:.0f} at {steps} steps, {time_to_target:.2f} s")
            if stop_at_target:
                break
        if verbose and (iteration % 40 == 0 or steps >= total_steps):
            print(
                f"it {iteration:4d} steps {steps:6d} t {clock() - start:6.2f}s "
                f"return {mean_return:6.1f} loss {metrics['loss']:.3f} "
                f"kl {metrics['approx_kl']:.4f} ev {metrics['explained_variance']:.3f}"
            )
    wall = clock() - start
    env.close()
    if verbose:
        print(
            f"build {build_time:.2f} s; steps {steps} (real transitions {env.env_steps}); "
            f"wall {wall:.2f} s; {steps / wall:.0f} steps/s"
        )
        print(
            f"time to mean return >= {target:.0f}: {time_to_target:.2f} s at {steps_to_target} "
            f"steps ({time_to_target + build_time:.2f} s with build)"
        )
        print("breakdown: " + Timers(timers).report(wall))
        print(
            f"per call: inference {1e6 * timers['inference'] / (calls - 1):.0f} us, "
            f"env {1e6 * timers['env'] / calls:.0f} us, buffer {1e6 * timers['buffer'] / calls:.0f} us, "
            f"update {1e3 * timers['update'] / (iteration - 1):.2f} ms"
        )
    return {
        "seed": seed,
        "steps": steps,
        "wall": wall,
        "steps_per_s": steps / wall,
        "build": build_time,
        "time_to_target": time_to_target,
        "steps_to_target": steps_to_target,
        "final_mean_return": env.mean_return(),
        **{f"t_{k}": v for k, v in timers.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--stop", action="store_true", help="stop when the target is reached")
    parser.add_argument("--no-jit", action="store_true", help="do not compile with XLA")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 1), metavar=("INTER", "INTRA"))
    parser.add_argument("--xla-cache", metavar="DIR", help="persistent XLA compilation cache")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    configure_threads(*args.threads)
    if args.xla_cache:
        enable_xla_cache(args.xla_cache)
    result = train(args.seed, args.steps, args.stop, jit_compile=not args.no_jit)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
