"""What a SAC gradient step costs the small calls that follow it: the env step and the actor call.

    nice -n 5 .venv/bin/python benchmarks/after_update.py [--env HalfCheetah-v5] [--calls 300]
        [--threads INTER INTRA]

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
``sac_speed.py`` prints both sides). Figures vary with the machine's load: compare within one
run.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgen.runtime.tfutil import configure_threads  # noqa: E402


def mean_ms(call: Callable[[], object], calls: int, before: Callable[[], object] | None = None) -> float:
    """Mean time of ``call`` over ``calls`` calls, ``before`` (untimed) ahead of each."""
    total = 0.0
    for _ in range(calls):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        total += time.perf_counter() - started
    return 1e3 * total / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pause", type=float, default=2.0, help="ms between the gradient step and the call")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 2), metavar=("INTER", "INTRA"))
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
    print(f"  gradient step              {mean_ms(update, args.calls):7.3f} ms")
    print("                             back to back   after a gradient step   after one and a pause")
    for name, call in (("env step", step_env), ("actor call", act)):
        alone = mean_ms(call, args.calls)
        after = mean_ms(call, args.calls, update)
        paused = mean_ms(call, args.calls, update_and_pause)
        print(f"  {name:<25}{alone:9.3f} ms {after:15.3f} ms {paused:21.3f} ms")


if __name__ == "__main__":
    main()
