"""rlgen's DQN update against Stable-Baselines3's, step by step, from the same weights on the same batches.

    python benchmarks/dqn_step_vs_sb3.py --sb3-python /path/to/python-with-sb3 [--steps 3]

The SB3 half runs in ``--sb3-python`` (stable-baselines3, torch and ale-py). It builds the RL Zoo's
Atari DQN (``CnnPolicy``, lr 1e-4, batch 32) on ``ALE/Breakout-v5`` under ``make_atari_env`` and
``VecFrameStack(4)``, and plays random actions to gather real frames. Then it runs SB3's own
``DQN.train`` once per batch, with the replay's ``sample`` replaced by a fixed batch. The rewards
are drawn from {0, 1} and a few transitions are made terminal, so the targets are not trivial. It
saves the initial and updated Q-network weights, and the batches.

The rlgen half loads SB3's initial weights into rlgen's Nature CNN. Kernels go from OIHW to HWIO,
and the dense layer's inputs from NCHW's flattening order to NHWC's. It builds a ``DQNLearner``
with its defaults, which are SB3's, and takes the same steps. For each variable it prints the
difference from SB3's weights (its Euclidean norm) as a fraction of SB3's change in that step.
Float rounding alone gives about 1e-5 a step; a learner that differs shows orders of magnitude
more (with gamma 0.9 instead of SB3's 0.99: 0.05 to 0.37 after 2 steps).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

BATCH = 32


def sb3_half(out: Path, steps: int) -> None:
    """In SB3's interpreter: frames, initial weights, SB3's updates, saved to ``out``."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    torch.set_num_threads(1)
    env = VecFrameStack(make_atari_env("ALE/Breakout-v5", n_envs=1, seed=0, env_kwargs={"frameskip": 1}), 4)
    model = DQN("CnnPolicy", env, learning_rate=1e-4, batch_size=BATCH, buffer_size=1000, learning_starts=0, seed=0)
    model.set_logger(configure(None, []))
    venv, rng, n = model.get_env(), np.random.default_rng(0), BATCH * steps  # channels first
    obs, fields = venv.reset(), {"O": [], "A": [], "N": [], "D": []}
    while len(fields["O"]) < n:
        action = rng.integers(4, size=1)
        nxt, _, done, info = venv.step(action)
        last = info[0]["terminal_observation"] if done[0] else nxt[0]
        for key, x in zip("OAND", (obs[0], action[0], last, float(done[0])), strict=True):
            fields[key].append(x)
        obs = nxt
    data = {k: np.asarray(v) for k, v in fields.items()}
    data["R"] = rng.integers(0, 2, size=n).astype(np.float32)
    data["D"][rng.choice(n, n // 12, replace=False)] = 1.0

    def batch(i: int) -> ReplayBufferSamples:
        rows = slice(i, i + BATCH)
        columns = {k: data[k][rows] if k in "ON" else data[k][rows, None] for k in "OANDR"}  # SB3's field order
        return ReplayBufferSamples(*(torch.as_tensor(x) for x in columns.values()), None)

    batches = (batch(i) for i in range(0, n, BATCH))
    model.replay_buffer.sample = lambda batch_size, env=None: next(batches)

    def weights(step: int) -> dict[str, np.ndarray]:
        return {f"w{step}/{k}": v.detach().numpy().copy() for k, v in model.q_net.state_dict().items()}

    saved = weights(0)
    for step in range(1, steps + 1):
        model.train(gradient_steps=1, batch_size=BATCH)
        saved.update(weights(step))
    np.savez(out, **data, **saved)


def nature_cnn(w: Callable[[str], np.ndarray]) -> list[np.ndarray]:
    """SB3's ``NatureCNN`` weights (``w(key)``: a state-dict entry under ``features_extractor.``)
    as rlgen's Nature CNN torso variables, in its trainable order (b, w per layer): kernels OIHW
    to HWIO, the dense layer's inputs from NCHW's flattening order to NHWC's."""
    out = []
    for i in (0, 2, 4):
        out += [w(f"features_extractor.cnn.{i}.bias"), w(f"features_extractor.cnn.{i}.weight").transpose(2, 3, 1, 0)]
    dense = w("features_extractor.linear.0.weight")  # [512, 64 * 7 * 7], inputs in (c, h, w) order
    return out + [
        w("features_extractor.linear.0.bias"),
        dense.reshape(512, 64, 7, 7).transpose(2, 3, 1, 0).reshape(3136, 512),
    ]


def to_rlgen(z: np.lib.npyio.NpzFile, step: int) -> list[np.ndarray]:
    """SB3's Q-network after ``step`` as rlgen's Nature CNN variables (trainable order: b, w per layer)."""

    def w(key: str) -> np.ndarray:
        return z[f"w{step}/{key}"]

    return nature_cnn(w) + [w("q_net.0.bias"), w("q_net.0.weight").T]


def rlgen_half(saved: Path, steps: int) -> None:
    from rlgen.runtime import tfimport

    tfimport.install()  # TensorFlow's import without its native log lines, as an rlgen rank's
    from rlgen.algorithms.dqn.config import DQNConfig
    from rlgen.algorithms.dqn.learner import DQNLearner
    from rlgen.runtime.convnets import ConvNet
    from rlgen.runtime.qvalue import QNetwork

    z = np.load(saved)
    net = ConvNet((4, 84, 84), 4, init="torch_uniform")
    names = ["conv0.b", "conv0.w", "conv1.b", "conv1.w", "conv2.b", "conv2.w", "dense.b", "dense.w", "head.b", "head.w"]
    before = to_rlgen(z, 0)
    for v, x in zip(net.trainable_variables, before, strict=True):
        v.assign(x)
    learner = DQNLearner(QNetwork(net, 4), DQNConfig(jit_compile=False), (4, 84, 84), obs_dtype="uint8")
    print(f"{steps} gradient steps of {BATCH} real Breakout frames from SB3's initial weights;")
    print("per variable: |rlgen - SB3| after the step / |SB3's change in the step| (Euclidean norms)")
    print("step  loss     grad_norm  " + " ".join(f"{n:>8}" for n in names))
    for step in range(1, steps + 1):
        i = slice(BATCH * (step - 1), BATCH * step)
        m = learner.update((z["O"][i], z["A"][i].astype(np.int32), z["R"][i], z["N"][i], z["D"][i]))
        theirs = to_rlgen(z, step)
        ratios = [
            np.linalg.norm(v.numpy() - t) / max(float(np.linalg.norm(t - b)), 1e-12)
            for v, t, b in zip(net.trainable_variables, theirs, before, strict=True)
        ]
        print(f"{step:<5} {m['loss']:.5f}  {m['grad_norm']:.4f}     " + " ".join(f"{r:8.1e}" for r in ratios))
        before = theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sb3-python", help="an interpreter with stable-baselines3, torch and ale-py")
    ap.add_argument("--steps", type=int, default=3, help="gradient steps (default 3)")
    ap.add_argument("--sb3-half", type=Path, help=argparse.SUPPRESS)  # internal: run the SB3 half, write here
    args = ap.parse_args()
    if args.sb3_half:
        return sb3_half(args.sb3_half, args.steps)
    if not args.sb3_python:
        ap.error("--sb3-python is required")
    in_two_halves(__file__, args.sb3_python, "--steps", args.steps, rlgen_half)


def in_two_halves(script: str, sb3_python: str, option: str, n: int, rlgen_half: Callable[[Path, int], None]) -> None:
    """Run ``script --sb3-half FILE option n`` in ``sb3_python`` (one thread), then ``rlgen_half(FILE, n)``."""
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "sb3.npz"
        cmd = [sb3_python, script, "--sb3-half", str(saved), option, str(n)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if done.returncode:
            sys.exit(f"the SB3 half failed (exit {done.returncode}):\n{done.stderr}")
        rlgen_half(saved, n)


if __name__ == "__main__":
    sys.exit(main())
