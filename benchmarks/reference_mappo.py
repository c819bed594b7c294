"""The reference MAPPO trainer (marlbenchmark/on-policy) as a variant of a speed run.

The reference is not a dependency of rlgen: it is a checkout run from its own virtual
environment, laid out as ``DIR/src`` (the repository, whose ``onpolicy/scripts/train/train_mpe.py``
trains MPE) and ``DIR/.venv/bin/python`` (torch, gym 0.26 and its other requirements).
Its ``SubprocVecEnv`` of 128 processes does not start on 2 cores, so ``train_mpe.py`` runs
through a two-line launcher that swaps in the repository's own ``DummyVecEnv`` (its env copies
stepped in one process) and changes nothing else; the checkout stays as published.

It runs ``train_mpe_spread.sh``'s settings (3 agents, 128 envs x 25 steps, 10 epochs, one
minibatch, lr 7e-4, ``--use_ReLU`` as the script passes it) with the given algorithm
(``rmappo``: the script's GRU policy; ``mappo``: an MLP policy) for ``updates`` updates, and
times its log: every 5 updates it prints the env steps so far; the steady rate is the steps
between the first and last of those lines after ``warmup`` of them, over the time between their
arrival (updates included, start-up left out, as rlgen's steady rate).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

STEPS_PER_UPDATE = 128 * 25
#: train_mpe.py's main() with DummyVecEnv for SubprocVecEnv (see the module docstring)
LAUNCH = (
    "import sys; import onpolicy.scripts.train.train_mpe as t; t.SubprocVecEnv = t.DummyVecEnv; t.main(sys.argv[1:])"
)
#: The reference's log: every 5 updates a progress line, then the last rollout's reward line.
_PROGRESS = re.compile(r"total num timesteps (\d+)/(\d+), FPS (\d+)")
_REWARD = re.compile(r"average episode rewards is (\S+)")


@dataclass
class ReferenceRun:
    ok: bool
    steps_per_s: float = 0.0  # steady: between log lines after the warm-up ones
    run_rate: float = 0.0  # the reference's own FPS at its last line (env steps / time since start)
    points: int = 0
    process_wall: float = 0.0
    error: str = ""


def run_reference(directory: Path, algorithm: str, updates: int, seed: int = 1, warmup: int = 1) -> ReferenceRun:
    """Train the reference for ``updates`` updates and time it (see the module docstring)."""
    src = directory / "src"
    script = src / "onpolicy" / "scripts" / "train" / "train_mpe.py"
    python = directory / ".venv" / "bin" / "python"
    if not script.exists() or not python.exists():
        return ReferenceRun(False, error=f"no reference checkout at {directory} (src/onpolicy, .venv)")
    cmd = [
        str(python), "-u", "-c", LAUNCH,
        "--env_name", "MPE", "--algorithm_name", algorithm, "--experiment_name", f"speed_{algorithm}",
        "--scenario_name", "simple_spread", "--num_agents", "3", "--num_landmarks", "3", "--seed", str(seed),
        "--n_training_threads", "1", "--n_rollout_threads", "128", "--num_mini_batch", "1",
        "--episode_length", "25", "--num_env_steps", str(updates * STEPS_PER_UPDATE), "--ppo_epoch", "10",
        "--use_ReLU", "--gain", "0.01", "--lr", "7e-4", "--critic_lr", "7e-4",
        "--use_wandb", "--user_name", "speed",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    seen: list[tuple[float, int, int]] = []  # (arrival, env steps, its FPS)
    proc = subprocess.Popen(
        cmd,
        cwd=script.parent.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line])[-20:]
        if m := _PROGRESS.search(line):
            seen.append((time.perf_counter(), int(m.group(1)), int(m.group(3))))
    code = proc.wait()
    wall = time.perf_counter() - started
    if code != 0 or len(seen) < warmup + 2:
        why = f"exit {code}" if code else f"{len(seen)} progress lines, too few to time"
        return ReferenceRun(False, process_wall=wall, error=f"{why}: {''.join(tail)[-300:]}")
    (t0, s0, _), (t1, s1, fps) = seen[warmup], seen[-1]
    return ReferenceRun(True, (s1 - s0) / (t1 - t0), float(fps), len(seen) - warmup, wall)


def reference_curve(log: Path) -> list[tuple[int, float]]:
    """(env steps, "average episode rewards") of a reference trainer's log: the mean per-agent
    step reward of the last rollout x 25, each after the progress line that gives its steps."""
    out, steps = [], None
    for line in log.read_text(errors="replace").splitlines():
        if m := _PROGRESS.search(line):
            steps = int(m.group(1))
        elif (m := _REWARD.search(line)) and steps is not None:
            out.append((steps, float(m.group(1))))
            steps = None
    return out
