"""Hand-wired single-process SAC / TD3 on Pendulum-v1 (or a MuJoCo env) from the runtime's pieces.

RL Zoo hyper-parameters. SAC Pendulum-v1: 20k steps, lr 1e-3, the rest SB3's defaults
(buffer 1e6, learning_starts 100, batch 256, tau 0.005, gamma 0.99, train_freq 1,
gradient_steps 1, ent_coef auto, [256, 256] ReLU). TD3 Pendulum-v1 (the Zoo's
``td3.yml``): 20k steps, lr 1e-3, gamma 0.98, buffer 200k, learning_starts 10000,
normal action noise 0.1, ``train_freq [1, "episode"]`` with ``gradient_steps -1``
(one gradient step per env step, at the end of each 200-step episode: here
``train_freq 200``), [400, 300] ReLU. MuJoCo envs (``HalfCheetah-v5``): the Zoo's
``learning_starts 10000``, the rest SB3's defaults (TD3: normal noise 0.1).

    .venv/bin/python benchmarks/sac_core.py [--algo sac|td3] [--env Pendulum-v1] [--seed 0]
        [--steps N] [--train-freq N] [--gradient-steps N] [--learning-starts N] [--lr X]
        [--init torch] [--no-jit] [--threads INTER INTRA] [--json]

Loop as SB3's ``OffPolicyAlgorithm.learn`` with one env: before ``learning_starts``
transitions the actions are uniform over the action box; then the actor acts
(SAC: a sample of the squashed Gaussian; TD3: ``mu(s)`` plus clipped normal noise).
Every ``train_freq`` transitions (once more than ``learning_starts`` are stored) the
learner runs ``gradient_steps`` (default: ``train_freq``) gradient steps in ONE
compiled call on minibatches drawn together by ``ReplayBuffer.sample_many``.
``--train-freq 1`` is SB3's schedule; a larger one keeps the ratio of gradient steps
to env steps and trades freshness of the data for fewer calls. Steps count
transitions (SB3's ``num_timesteps``); the reset step after an episode is not one.

The networks are initialised as ``torch.nn.Linear`` (SB3's off-policy policies keep
that default) unless ``--init`` names a ``networks.INITIALIZERS`` entry. "wall" runs
from the first ``env.reset()``; the first update call XLA-compiles inside it.
``learn_steps_per_s`` is the rate after learning starts, the first (compiling) update
call excluded. ``cpu`` is the process's CPU time over the same span as "wall" (on a
shared machine, ``steps_per_cpu_s`` is the figure that does not depend on the load).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgen.runtime.tfutil import configure_threads  # noqa: E402

SB3_DEFAULTS = {
    "sac": {
        "lr": 3e-4,
        "buffer_size": 1_000_000,
        "learning_starts": 100,
        "batch_size": 256,
        "tau": 0.005,
        "gamma": 0.99,
        "train_freq": 1,
        "hidden": [256, 256],
    },
    "td3": {
        "lr": 1e-3,
        "buffer_size": 1_000_000,
        "learning_starts": 100,
        "batch_size": 256,
        "tau": 0.005,
        "gamma": 0.99,
        "train_freq": 1,
        "hidden": [400, 300],
        "noise_std": 0.0,
    },
}

ZOO: dict[tuple[str, str], dict[str, Any]] = {
    ("sac", "Pendulum-v1"): {"total_steps": 20_000, "lr": 1e-3},
    ("td3", "Pendulum-v1"): {
        "total_steps": 20_000,
        "lr": 1e-3,
        "gamma": 0.98,
        "buffer_size": 200_000,
        "learning_starts": 10_000,
        "noise_std": 0.1,
        "train_freq": 200,  # [1, "episode"] with gradient_steps -1; Pendulum's episodes are 200 steps
        "hidden": [400, 300],
    },
    ("sac", "HalfCheetah-v5"): {"total_steps": 1_000_000, "learning_starts": 10_000},
    ("td3", "HalfCheetah-v5"): {"total_steps": 1_000_000, "learning_starts": 10_000, "noise_std": 0.1},
}


def hyperparameters(algo: str, env_id: str) -> dict[str, Any]:
    """SB3's defaults for ``algo`` updated with the Zoo's entry for ``env_id`` (if any)."""
    hp = {"total_steps": 100_000, **SB3_DEFAULTS[algo]}
    hp.update(ZOO.get((algo, env_id), {}))
    return hp


def torch_default_init(network: Any, seed: int) -> None:
    """Redraw an MLP's weights and biases as ``torch.nn.Linear`` does: uniform on ``+-1/sqrt(fan_in)``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in [*network.hidden, network.head]:
        bound = 1.0 / np.sqrt(layer.w.shape[0])
        layer.w.assign(rng.uniform(-bound, bound, layer.w.shape).astype(np.float32))
        layer.b.assign(rng.uniform(-bound, bound, layer.b.shape).astype(np.float32))


def train(
    algo: str = "sac",
    env_id: str = "Pendulum-v1",
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    gradient_steps: int | None = None,
    init: str = "torch",
    jit_compile: bool = True,
    eval_episodes: int = 10,
    verbose: bool = True,
) -> dict[str, Any]:
    """Train ``algo`` on ``env_id``; returns the run's figures."""
    import numpy as np

    from rlgen.runtime.continuous import DeterministicActor, QCritic, SquashedGaussianActor, make_compiled_actor
    from rlgen.runtime.envs import VectorEnv
    from rlgen.runtime.evaluation.episodes import evaluate
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.policies import ActionSpec
    from rlgen.runtime.replay import ReplayBuffer

    hp = hyperparameters(algo, env_id)
    hp.update({k: v for k, v in (overrides or {}).items() if v is not None})
    train_freq = int(hp["train_freq"])
    grad_steps = int(gradient_steps or train_freq)
    total_steps = int(hp["total_steps"])

    t_build = time.perf_counter()
    env = VectorEnv(env_id, 1, seed=seed, vectorization="sync")
    obs_shape = tuple(env.observation_space.shape)
    spec = ActionSpec.from_space(env.action_space)
    dim = spec.num_outputs
    obs_size = int(np.prod(obs_shape))
    net = {
        "kind": "mlp",
        "hidden": hp["hidden"],
        "activation": "relu",
        "init": "he_normal" if init == "torch" else init,
    }

    def network(input_shape: tuple[int, ...], outputs: int, index: int) -> Any:
        built = build_network(net, input_shape, outputs, 1.0, seed=seed * 10 + index)
        if init == "torch":
            torch_default_init(built, seed * 10 + index)
        return built

    critic = QCritic([network((obs_size + dim,), 1, i + 1) for i in range(2)])
    if algo == "sac":
        from rlgen.algorithms.sac.config import SACConfig
        from rlgen.algorithms.sac.learner import SACLearner

        actor = SquashedGaussianActor(network(obs_shape, 2 * dim, 0), spec, seed=seed)
        config = SACConfig(lr=hp["lr"], gamma=hp["gamma"], tau=hp["tau"], jit_compile=jit_compile)
        learner: Any = SACLearner(actor, critic, config, obs_shape)
    else:
        from rlgen.algorithms.td3.config import TD3Config
        from rlgen.algorithms.td3.learner import TD3Learner

        actor = DeterministicActor(network(obs_shape, dim, 0), spec, seed=seed, noise_std=hp["noise_std"])
        config = TD3Config(lr=hp["lr"], gamma=hp["gamma"], tau=hp["tau"], jit_compile=jit_compile)
        learner = TD3Learner(actor, critic, config, obs_shape, seed=seed + 1)
    acting = make_compiled_actor(actor, obs_shape, jit_compile=jit_compile)
    replay = ReplayBuffer(hp["buffer_size"], obs_shape, spec.shape, np.float32, num_envs=1)
    rng = np.random.default_rng(seed)
    build_time = time.perf_counter() - t_build

    timers = dict.fromkeys(("act", "env", "replay", "sample", "update"), 0.0)
    clock = time.perf_counter
    start, cpu_start = clock(), time.process_time()
    obs = env.reset()
    steps, updates, since = 0, 0, 0
    learn_start: tuple[float, int] | None = None
    metrics: dict[str, float] = {}
    next_report = total_steps // 10
    while steps < total_steps:
        t0 = clock()
        action = acting.random(1) if steps < hp["learning_starts"] else acting(obs)
        t1 = clock()
        next_obs, reward, terminated, _ = env.step(action)
        t2 = clock()
        stored = replay.insert(obs, action, reward, next_obs, terminated, env.valid)
        t3 = clock()
        timers["act"] += t1 - t0
        timers["env"] += t2 - t1
        timers["replay"] += t3 - t2
        obs = next_obs
        steps += stored
        since += stored
        if stored and since >= train_freq and steps > hp["learning_starts"]:
            since = 0
            t0 = clock()
            batches = replay.sample_many(grad_steps, hp["batch_size"], rng)
            t1 = clock()
            metrics = learner.update(batches, steps / total_steps)
            t2 = clock()
            timers["sample"] += t1 - t0
            timers["update"] += t2 - t1
            updates += 1
            if updates == 1:
                learn_start = (t2, steps)  # after the first (compiling) call
        if verbose and steps >= next_report:
            next_report += total_steps // 10
            shown = " ".join(f"{k} {v:.3g}" for k, v in metrics.items())
            print(f"steps {steps:7d} t {clock() - start:7.1f}s return {env.mean_return():8.1f} {shown}", flush=True)
    wall, cpu = clock() - start, time.process_time() - cpu_start
    final_return = env.mean_return()
    env.close()
    t0 = clock()
    eval_returns = evaluate(acting.deterministic_fn(), {"id": env_id}, eval_episodes, seed + 10_000)
    eval_time = clock() - t0
    learn_rate = float("nan")
    if learn_start is not None and steps > learn_start[1]:
        learn_rate = (steps - learn_start[1]) / (start + wall - learn_start[0])
    if verbose:
        print(
            f"{algo} {env_id} seed {seed}: build {build_time:.2f} s; {steps} steps; wall {wall:.1f} s; "
            f"{steps / wall:.0f} steps/s ({learn_rate:.0f} while learning); {updates} update calls of "
            f"{grad_steps} gradient steps every {train_freq} steps; process CPU {cpu:.1f} s "
            f"({steps / cpu:.0f} steps per CPU second)"
        )
        print(
            f"final mean return (last 100 episodes) {final_return:.1f}; deterministic eval over {eval_episodes} "
            f"episodes {eval_returns.mean():.1f} +- {eval_returns.std():.1f} ({eval_time:.1f} s)"
        )
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in timers.items())
        print(f"breakdown: {parts}, other {wall - sum(timers.values()):.1f} s")
    return {
        "algo": algo,
        "env": env_id,
        "seed": seed,
        "steps": steps,
        "train_freq": train_freq,
        "gradient_steps": grad_steps,
        "wall": wall,
        "steps_per_s": steps / wall,
        "cpu": cpu,
        "steps_per_cpu_s": steps / cpu,
        "learn_steps_per_s": learn_rate,
        "build": build_time,
        "updates": updates,
        "final_mean_return": final_return,
        "eval_mean_return": float(eval_returns.mean()),
        "eval_std_return": float(eval_returns.std()),
        **{f"t_{k}": v for k, v in timers.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("sac", "td3"), default="sac")
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="env steps (default: the Zoo's n_timesteps)")
    parser.add_argument("--train-freq", type=int, default=None, help="env steps between update calls")
    parser.add_argument("--gradient-steps", type=int, default=None, help="per update call (default: train-freq)")
    parser.add_argument("--learning-starts", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--init", default="torch", help="torch (SB3's) or a networks.INITIALIZERS entry")
    parser.add_argument("--no-jit", action="store_true", help="do not compile with XLA")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 1), metavar=("INTER", "INTRA"))
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    configure_threads(*args.threads)
    overrides = {
        "total_steps": args.steps,
        "train_freq": args.train_freq,
        "learning_starts": args.learning_starts,
        "lr": args.lr,
    }
    result = train(
        args.algo,
        args.env,
        args.seed,
        overrides,
        gradient_steps=args.gradient_steps,
        init=args.init,
        jit_compile=not args.no_jit,
        eval_episodes=args.eval_episodes,
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
