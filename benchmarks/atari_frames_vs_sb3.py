"""The atari preset's training stream against SB3's: the same seed and actions through rlgen's
preset (``rlgen.dsl.atari.make``, training) and through SB3's ``make_atari_env`` (the Zoo's
``AtariWrapper``) under ``VecFrameStack(4)``, both on ``ALE/Breakout-v5`` with ``frameskip=1``.
It prints whether the clipped rewards and episode ends agree step for step, and how many stacked
observations differ, by how much, and in which slot of the stack.

    .venv/bin/python benchmarks/atari_frames_vs_sb3.py --sb3-python /path/to/sb3-venv/bin/python \\
        [--steps 3000] [--seed 7] [--sticky 0.25]

The SB3 side runs in its own interpreter (stable-baselines3, ale-py, opencv), which writes its
stream to a temporary file. Each side records, per step, the observation after the step (the
terminal one where an episode ended), then the reset's first observation.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ENV_ID = "ALE/Breakout-v5"


def actions(steps: int) -> np.ndarray:
    return np.random.default_rng(123).integers(0, 4, size=steps)


def _record(steps: int, first: np.ndarray, step) -> dict[str, np.ndarray]:
    """One side's stream: ``step(action)`` returns the observation after the action (the
    terminal one where the episode ended), the reward, and the reset's first observation where
    the episode ended (else ``None``)."""
    frames, rewards, ends = [first], [], []
    for a in actions(steps):
        obs, reward, restart = step(int(a))
        frames += [obs] if restart is None else [obs, restart]
        rewards.append(reward)
        ends.append(restart is not None)
    return {"frames": np.stack(frames), "rewards": np.array(rewards), "ends": np.array(ends)}


def rlgen_stream(steps: int, seed: int, sticky: float) -> dict[str, np.ndarray]:
    from rlgen.dsl import atari

    env = atari.make(ENV_ID, {"repeat_action_probability": sticky})

    def step(action: int):
        obs, reward, terminated, truncated, _ = env.step(action)
        return obs, reward, env.reset()[0] if terminated or truncated else None

    return _record(steps, env.reset(seed=seed)[0], step)


def sb3_stream(steps: int, seed: int, sticky: float) -> dict[str, np.ndarray]:
    from sb3_atari import make_env  # beside this script; the env the learning comparisons use

    env = make_env(seed, n_envs=1, repeat_action_probability=sticky)

    def chw(obs: np.ndarray) -> np.ndarray:  # SB3 stacks channels-last
        return np.transpose(obs, (2, 0, 1))

    def step(action: int):
        obs, reward, done, infos = env.step(np.array([action]))
        if done[0]:
            return chw(infos[0]["terminal_observation"]), reward[0], chw(obs[0])
        return chw(obs[0]), reward[0], None

    return _record(steps, chw(env.reset()[0]), step)


def compare(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> str:
    lines = [
        f"steps {len(ours['rewards']):,}, episodes ended (rlgen, SB3): {ours['ends'].sum()}, {theirs['ends'].sum()}",
        f"clipped rewards equal at every step: {np.array_equal(ours['rewards'], theirs['rewards'])}"
        f" (sums {ours['rewards'].sum():g}, {theirs['rewards'].sum():g})",
        f"episode ends equal at every step: {np.array_equal(ours['ends'], theirs['ends'])}",
    ]
    if ours["frames"].shape != theirs["frames"].shape:
        return "\n".join([*lines, f"observations: shapes differ {ours['frames'].shape} {theirs['frames'].shape}"])
    diff = np.abs(ours["frames"].astype(np.int16) - theirs["frames"].astype(np.int16))
    n = len(diff)
    last = np.zeros(n, bool)  # the observations that end an episode (each followed by its reset's)
    last[np.flatnonzero(ours["ends"]) + np.arange(1, ours["ends"].sum() + 1)] = True
    per_obs = diff.reshape(n, -1).max(axis=1)
    lines.append(f"stacked observations identical: {int((per_obs == 0).sum()):,} of {n:,}")
    for slot in range(diff.shape[1]):
        d = diff[:, slot].reshape(n, -1)
        differ = d.max(axis=1) > 0
        name = "newest" if slot == diff.shape[1] - 1 else "older"
        lines.append(
            f"  stack slot {slot} ({name}): differs in {int(differ.sum()):,} observations"
            f" ({int((differ & last).sum())} of them an episode's last), max |diff| {int(d.max())},"
            f" pixels differing where it does {_pixels(d[differ])}"
        )
    return "\n".join(lines)


def _pixels(rows: np.ndarray) -> str:
    return "-" if not len(rows) else f"{(rows > 0).sum(axis=1).mean():.0f} of {rows.shape[1]:,} on average"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sb3-python", help="an interpreter with stable-baselines3, ale-py and opencv")
    ap.add_argument("--steps", type=int, default=3000, help="random actions to take (default 3000)")
    ap.add_argument("--seed", type=int, default=7, help="the envs' seed (default 7)")
    ap.add_argument("--sticky", type=float, default=0.25, help="repeat_action_probability (default 0.25, v5's)")
    ap.add_argument("--sb3-side", metavar="OUT", help=argparse.SUPPRESS)  # the SB3 interpreter's half
    args = ap.parse_args()
    if args.sb3_side:
        np.savez(args.sb3_side, **sb3_stream(args.steps, args.seed, args.sticky))
        return
    if not args.sb3_python:
        ap.error("--sb3-python is needed")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sb3.npz"
        cmd = [args.sb3_python, __file__, "--sb3-side", str(out), "--steps", str(args.steps)]
        subprocess.run([*cmd, "--seed", str(args.seed), "--sticky", str(args.sticky)], check=True)
        theirs = dict(np.load(out))
    ours = rlgen_stream(args.steps, args.seed, args.sticky)
    print(f"{ENV_ID}, frameskip=1, sticky {args.sticky}, seed {args.seed}, random actions (numpy seed 123)")
    print("rlgen: the atari preset (training); SB3: make_atari_env (AtariWrapper) + VecFrameStack(4)")
    print(compare(ours, theirs))


if __name__ == "__main__":
    main()
