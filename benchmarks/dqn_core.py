"""Hand-wired single-process DQN on CartPole-v1 from the runtime's pieces.

RL Zoo hyper-parameters (1 env, 50k steps, lr 2.3e-3, batch 64, buffer 100k,
learning_starts 1000, gamma 0.99, target_update_interval 10, train_freq 256,
gradient_steps 128, exploration 1.0 -> 0.04 over the first 16%, [256, 256] ReLU,
Adam). Reports wall time to a mean return of 475 over the last 100 episodes, the
final mean return and the greedy policy's return over 10 evaluation episodes.

    .venv/bin/python benchmarks/dqn_core.py [--seed 0] [--steps 50000] [--stop]
        [--init glorot_uniform] [--vectorization sync] [--no-jit] [--threads INTER INTRA] [--json]

Loop as SB3's ``DQN.learn``: before ``learning_starts`` actions are uniformly random
(no network call); then ε-greedy with ε from the linear schedule of env steps. After
every ``train_freq`` env steps (once ``learning_starts`` steps are taken) the learner
runs ``gradient_steps`` gradient steps in ONE compiled call on minibatches drawn
together by ``ReplayBuffer.sample_many``. SB3 copies the target every
``target_update_interval`` (10) env steps; the online weights only change in the
learning phase, so that is the same as one copy before each learning phase, which
is what this loop does.

"wall" runs from the first ``env.reset()``; "build" (networks, envs, tracing) comes
before it; the first update call XLA-compiles inside the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgen.runtime.tfutil import configure_threads  # noqa: E402

ZOO = {
    "total_steps": 50_000,
    "lr": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "hidden": [256, 256],
}


def torch_default_init(network: Any, seed: int) -> None:
    """Redraw an MLP's weights and biases as ``torch.nn.Linear`` does (what SB3's DQN uses):
    uniform on ``+-1/sqrt(fan_in)``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in [*network.hidden, network.head]:
        bound = 1.0 / np.sqrt(layer.w.shape[0])
        layer.w.assign(rng.uniform(-bound, bound, layer.w.shape).astype(np.float32))
        layer.b.assign(rng.uniform(-bound, bound, layer.b.shape).astype(np.float32))


def train(
    seed: int = 0,
    total_steps: int = ZOO["total_steps"],
    stop_at_target: bool = False,
    target: float = 475.0,
    init: str = "glorot_uniform",
    vectorization: str = "sync",
    jit_compile: bool = True,
    eval_episodes: int = 10,
    verbose: bool = True,
) -> dict[str, float]:
    """Train DQN on CartPole-v1; returns the run's figures."""
    import numpy as np

    from rlgen.algorithms.dqn.config import DQNConfig
    from rlgen.algorithms.dqn.learner import DQNLearner
    from rlgen.runtime.envs import VectorEnv
    from rlgen.runtime.evaluation.episodes import evaluate
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.qvalue import Exploration, QNetwork, make_q_actor
    from rlgen.runtime.replay import ReplayBuffer

    hp = ZOO
    t_build = time.perf_counter()
    env = VectorEnv("CartPole-v1", 1, seed=seed, vectorization=vectorization)
    obs_shape = env.observation_space.shape
    n_actions = int(env.action_space.n)
    net = {
        "kind": "mlp",
        "hidden": hp["hidden"],
        "activation": "relu",
        "init": "he_normal" if init == "torch" else init,
    }
    network = build_network(net, obs_shape, n_actions, 1.0, seed=seed)
    if init == "torch":
        torch_default_init(network, seed)
    q = QNetwork(network, n_actions, seed=seed)
    config = DQNConfig(lr=hp["lr"], gamma=hp["gamma"], jit_compile=jit_compile)
    learner = DQNLearner(q, config, obs_shape)
    actor = make_q_actor(q, obs_shape, jit_compile=jit_compile)
    replay = ReplayBuffer(hp["buffer_size"], obs_shape, (), np.int32, num_envs=1)
    exploration = Exploration(1.0, hp["exploration_final_eps"], hp["exploration_fraction"])
    rng = np.random.default_rng(seed)
    build_time = time.perf_counter() - t_build

    timers = dict.fromkeys(("act", "env", "replay", "sample", "update"), 0.0)
    clock = time.perf_counter
    start = clock()
    obs = env.reset()
    steps, updates, time_to_target, steps_to_target = 0, 0, float("nan"), 0
    metrics: dict[str, float] = {}
    while steps < total_steps:
        t0 = clock()
        if steps < hp["learning_starts"]:
            action = rng.integers(0, n_actions, size=1, dtype=np.int32)
        else:
            action = actor(obs, exploration(steps / total_steps))
        t1 = clock()
        next_obs, reward, terminated, _ = env.step(action)
        t2 = clock()
        replay.insert(obs, action, reward, next_obs, terminated, env.valid)
        t3 = clock()
        timers["act"] += t1 - t0
        timers["env"] += t2 - t1
        timers["replay"] += t3 - t2
        obs = next_obs
        steps += 1  # every env step counts, reset steps too (as SB3's num_timesteps)
        if steps % hp["train_freq"] == 0 and steps > hp["learning_starts"]:
            t0 = clock()
            batches = replay.sample_many(hp["gradient_steps"], hp["batch_size"], rng)
            t1 = clock()
            learner.sync_target()
            metrics = learner.update(batches, steps / total_steps)
            t2 = clock()
            timers["sample"] += t1 - t0
            timers["update"] += t2 - t1
            updates += 1
            mean_return = env.mean_return()
            if steps_to_target == 0 and len(env.episode_returns) >= 1 and mean_return >= target:
                time_to_target, steps_to_target = clock() - start, steps
                if verbose:
                    print(f"reached {target:.0f} at {steps} steps, {time_to_target:.2f} s")
                if stop_at_target:
                    break
            if verbose and updates % 20 == 0:
                print(
                    f"steps {steps:6d} t {clock() - start:6.2f}s eps {exploration(steps / total_steps):.3f} "
                    f"return {mean_return:6.1f} episodes {len(env.completed):4d} loss {metrics['loss']:.4f} "
                    f"q {metrics['q']:.2f} grad {metrics['grad_norm']:.3f}"
                )
    wall = clock() - start
    final_return = env.mean_return()
    env.close()
    t0 = clock()
    eval_returns = evaluate(actor.greedy_fn(), {"id": "CartPole-v1"}, eval_episodes, seed + 10_000)
    eval_time = clock() - t0
    if verbose:
        print(
            f"build {build_time:.2f} s; steps {steps} (transitions {replay.inserted}); wall {wall:.2f} s; "
            f"{steps / wall:.0f} steps/s; {updates} update calls of {hp['gradient_steps']} gradient steps"
        )
        print(f"time to mean return >= {target:.0f}: {time_to_target:.2f} s at {steps_to_target} steps")
        print(
            f"final mean return (last 100 episodes) {final_return:.1f}; greedy eval over {eval_episodes} "
            f"episodes {eval_returns.mean():.1f} +- {eval_returns.std():.1f} ({eval_time:.2f} s)"
        )
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in timers.items())
        print(f"breakdown: {parts}, other {wall - sum(timers.values()):.2f} s")
        if updates > 1:
            print(
                f"per update call {1e3 * timers['update'] / updates:.1f} ms "
                f"({1e3 * timers['update'] / updates / hp['gradient_steps']:.2f} ms per gradient step, "
                "first call with XLA compile included)"
            )
    return {
        "seed": seed,
        "steps": steps,
        "wall": wall,
        "steps_per_s": steps / wall,
        "build": build_time,
        "time_to_target": time_to_target,
        "steps_to_target": steps_to_target,
        "final_mean_return": final_return,
        "eval_mean_return": float(eval_returns.mean()),
        **{f"t_{k}": v for k, v in timers.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=ZOO["total_steps"])
    parser.add_argument("--stop", action="store_true", help="stop when the target is reached")
    parser.add_argument("--init", default="glorot_uniform", help="networks.INITIALIZERS entry, or torch (SB3's)")
    parser.add_argument(
        "--vectorization", default="sync", help="VectorEnv backend (sync: about 2x faster than numpy's at 1 env)"
    )
    parser.add_argument("--no-jit", action="store_true", help="do not compile with XLA")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 1), metavar=("INTER", "INTRA"))
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    configure_threads(*args.threads)
    result = train(
        args.seed, args.steps, args.stop, init=args.init, vectorization=args.vectorization, jit_compile=not args.no_jit
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
