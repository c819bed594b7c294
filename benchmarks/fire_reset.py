"""How often the atari preset's fire-on-reset serves the ball in Breakout, per backend.

A no-op policy loses a life only if the game was served: Breakout waits for FIRE at the start
of each life. For each backend and sticky-action setting, ``--envs`` fresh envs (seeds 0..N-1)
take no-ops for ``--steps`` agent steps after their first reset; a lost life in that time
means the reset's FIRE was taken. Under v5's sticky actions (0.25 per emulator frame) envpool's
single frame of FIRE can be replaced by the no-op before it; the gymnasium preset's FIRE step
lasts 4 frames.

    .venv/bin/python benchmarks/fire_reset.py [--envs 64] [--steps 150]
"""

from __future__ import annotations

import argparse

import numpy as np


def gymnasium_served(envs: int, steps: int, sticky: float) -> int:
    from rlgen.dsl import atari

    served = 0
    for seed in range(envs):
        env = atari.make("ALE/Breakout-v5", {"repeat_action_probability": sticky})
        env.reset(seed=seed)
        for _ in range(steps):
            if env.step(0)[2]:
                served += 1
                break
        env.close()
    return served


def envpool_served(envs: int, steps: int, sticky: float) -> int:
    from rlgen.dsl import atari_envpool

    env = atari_envpool.make("ALE/Breakout-v5", envs, 0, {"repeat_action_probability": sticky})
    env.reset()
    lost = np.zeros(envs, bool)
    for _ in range(steps):
        lost |= env.step(np.zeros(envs, np.int32))[2]
    env.close()
    return int(lost.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=150, help="no-op agent steps after the reset")
    args = ap.parse_args()
    from rlgen.dsl import atari_envpool

    backends = {"gymnasium": gymnasium_served}
    if atari_envpool.installed():
        backends["envpool"] = envpool_served
    print(f"ALE/Breakout-v5, atari preset, a no-op policy for {args.steps} agent steps after the first reset")
    print("| backend | repeat_action_probability | envs served |")
    print("|---|---|---|")
    for name, served in backends.items():
        for sticky in (0.25, 0.0):
            print(f"| {name} | {sticky} | {served(args.envs, args.steps, sticky)} of {args.envs} |")
    if "envpool" not in backends:
        print("envpool: not installed (pip install 'rlgen[envpool]')")


if __name__ == "__main__":
    main()
