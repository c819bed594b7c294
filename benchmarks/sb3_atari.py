"""Stable-Baselines3's PPO on Breakout with the RL Zoo's Atari settings, timed per iteration:
the other side of ``benchmarks/pixels.py --sb3-python``.

Run with an interpreter that has stable-baselines3 (2.9), torch, ale-py and gymnasium (SB3 is
not a dependency of rlgen), e.g. ``/path/to/sb3-venv/bin/python benchmarks/sb3_atari.py``. The
env is the one rlgen's ``atari`` preset makes: ``ALE/Breakout-v5`` with ``frameskip=1`` (v5's
sticky actions, 0.25, kept) under SB3's ``AtariWrapper`` (no-op reset up to 30, frame skip 4,
life loss as episode end, reward clipping, 84x84 grey) and ``VecFrameStack(4)``, 8 envs in one
process (``DummyVecEnv``, as ``make_atari_env``). PPO: ``CnnPolicy``, 128 steps, 4 epochs of
minibatch 256, lr and clip linear from 2.5e-4 and 0.1, vf 0.5, ent 0.01. It prints one JSON line:
env steps/s over iterations 2..N and the seconds of their rollouts and updates.

    python benchmarks/sb3_atari.py [--iterations 4] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import time

import ale_py
import gymnasium
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack


class Clock(BaseCallback):
    """The wall time of each rollout, and of each update (between a rollout's end and the next start)."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, float]] = []

    def _on_rollout_start(self) -> None:
        self.marks.append(("rollout_start", time.perf_counter()))

    def _on_rollout_end(self) -> None:
        self.marks.append(("rollout_end", time.perf_counter()))

    def _on_step(self) -> bool:
        return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    gymnasium.register_envs(ale_py)  # the ALE/ namespace
    env = make_atari_env("ALE/Breakout-v5", n_envs=8, seed=args.seed, env_kwargs={"frameskip": 1})
    env = VecFrameStack(env, n_stack=4)
    model = PPO(
        "CnnPolicy",
        env,
        n_steps=128,
        n_epochs=4,
        batch_size=256,
        learning_rate=lambda f: 2.5e-4 * f,
        clip_range=lambda f: 0.1 * f,
        vf_coef=0.5,
        ent_coef=0.01,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    clock = Clock()
    start = time.perf_counter()
    model.learn(total_timesteps=args.iterations * 128 * 8, callback=clock)
    end = time.perf_counter()
    starts = [t for k, t in clock.marks if k == "rollout_start"]
    ends = [t for k, t in clock.marks if k == "rollout_end"]
    bounds = [*starts[1:], end]  # each iteration: its rollout, then its update until the next rollout
    rollout = sum(e - s for s, e in zip(starts[1:], ends[1:], strict=True))
    update = sum(b - e for e, b in zip(ends[1:], bounds[1:], strict=True))
    steps = (len(starts) - 1) * 128 * 8
    print(
        json.dumps(
            {
                "steps": steps,
                "seconds": bounds[-1] - starts[1],
                "steps_per_s": steps / (bounds[-1] - starts[1]),
                "rollout_s": rollout,
                "update_s": update,
                "total_s": end - start,
            }
        )
    )


if __name__ == "__main__":
    main()
