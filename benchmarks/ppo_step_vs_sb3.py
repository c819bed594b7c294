"""rlgen's PPO update against Stable-Baselines3's, from the same weights on the same rollout.

    python benchmarks/ppo_step_vs_sb3.py --sb3-python /path/to/python-with-sb3 [--epochs 1]

The SB3 half runs in ``--sb3-python`` (stable-baselines3, torch and ale-py). It builds PPO's
``CnnPolicy`` with the RL Zoo's Atari settings (8 envs x 128 steps, minibatch 256, lr 2.5e-4, clip
0.1, vf 0.5, ent 0.01) on the comparisons' env (``sb3_atari.make_env``: ``ALE/Breakout-v5`` under
``AtariWrapper`` and ``VecFrameStack(4)``), collects one rollout with SB3's own
``collect_rollouts`` and runs SB3's own ``train`` on it, recording the minibatch permutations it
draws. It saves the rollout, SB3's advantages, the permutations, its loss figures and the policy's
weights before and after.

The rlgen half loads SB3's initial weights into the example's network (the Nature CNN shared by
the policy and the value, the two heads fused; kernels OIHW to HWIO, the dense layer's inputs from
NCHW's flattening order to NHWC's), gives a ``PPOLearner`` with the example's settings the same
rollout (SB3's done flags as terminations; SB3 has no reset rows, so every row is valid) and
SB3's permutations in rlgen's row order, and runs one update. It prints the largest difference
between its GAE advantages and SB3's, both sides' loss figures, and per variable the difference
from SB3's updated weights (Euclidean norm) as a fraction of SB3's change. After one epoch (4
gradient steps) the two agree to about 1e-5 of the change, float rounding; after the Zoo's 4 epochs
(16 steps) to 1e-2 at most, with the losses and the entropy equal to 6 digits. The approx_kl
figures differ by definition: SB3 logs the last epoch's mean, rlgen the mean over all steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from dqn_step_vs_sb3 import in_two_halves, nature_cnn  # beside this script

T, B, MINIBATCH = 128, 8, 256
#: examples/ppo-breakout.rl.yaml's torso as ``rlgen build`` resolves it (the Nature CNN)
TORSO = {
    "kind": "cnn",
    "layers": [{"filters": 32, "kernel": 8, "stride": 4}, {"filters": 64, "kernel": 4, "stride": 2}]
    + [{"filters": 64, "kernel": 3, "stride": 1}],
    "hidden": [512],
    "activation": "relu",
    "init": "orthogonal",
}
NAMES = ("conv0.b", "conv0.w", "conv1.b", "conv1.w", "conv2.b", "conv2.w", "dense.b", "dense.w", "head.b", "head.w")


def sb3_half(out: Path, epochs: int) -> None:
    """In SB3's interpreter: a rollout, SB3's update of it, saved to ``out``."""
    import torch
    from sb3_atari import make_env  # beside this script
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)
    settings = {"n_steps": T, "batch_size": MINIBATCH, "vf_coef": 0.5, "ent_coef": 0.01, "seed": 0, "device": "cpu"}
    model = PPO("CnnPolicy", make_env(0, B), n_epochs=epochs, learning_rate=2.5e-4, clip_range=0.1, **settings)
    model.set_logger(configure(None, []))
    _, callback = model._setup_learn(T * B)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=T)
    buf = model.rollout_buffer
    starts = np.concatenate([buf.episode_starts[1:], model._last_episode_starts[None]]).astype(np.float32)
    data = {
        "O": buf.observations.astype(np.uint8),
        "A": buf.actions[..., 0].astype(np.int32),
        "R": buf.rewards,
        "D": starts,  # done after step t (the next step's episode start)
        "L": buf.log_probs,
        "V": buf.values,
        "ADV": buf.advantages,
        "last": np.asarray(model._last_obs, np.uint8),
    }
    perms, draw = [], np.random.permutation

    def recorded(n):
        perms.append(draw(n))
        return perms[-1]

    np.random.permutation = recorded
    weights = {f"w0/{k}": v.numpy().copy() for k, v in model.policy.state_dict().items()}
    model.train()
    weights.update({f"w1/{k}": v.numpy().copy() for k, v in model.policy.state_dict().items()})
    logged = {f"log/{k[6:]}": np.float64(v) for k, v in model.logger.name_to_value.items() if k.startswith("train/")}
    np.savez(out, **data, **weights, **logged, perms=np.stack(perms))


def to_rlgen(z: np.lib.npyio.NpzFile, step: int) -> list[np.ndarray]:
    """SB3's policy after ``step`` as rlgen's variables (:data:`NAMES`; the heads fused: policy, value)."""

    def w(key: str) -> np.ndarray:
        return z[f"w{step}/{key}"]

    heads = ("action_net", "value_net")
    bias, weight = (np.concatenate([w(f"{h}.{k}") for h in heads]) for k in ("bias", "weight"))
    return [*nature_cnn(w), bias, weight.T]


def rlgen_half(saved: Path, epochs: int) -> None:
    from rlgen.runtime import tfimport

    tfimport.install()  # TensorFlow's import without its native log lines, as an rlgen rank's
    import tensorflow as tf

    from rlgen.algorithms.ppo.config import PPOConfig
    from rlgen.algorithms.ppo.learner import PPOLearner, compile_update, gae
    from rlgen.runtime.buffers import Rollout
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.policies import ActionSpec, Policy, Value
    from rlgen.runtime.tfutil import flat_caller

    z = np.load(saved)
    net = build_network(TORSO, (4, 84, 84), [4, 1], output_gain=[0.01, 1.0], seed=1, name="torso")
    before = to_rlgen(z, 0)
    for v, x in zip(net.trainable_variables, before, strict=True):
        v.assign(x)
    policy = Policy(net, ActionSpec(n=4), outputs=(0, 4), name="actor")
    value = Value(net, output=4, name="critic")
    config = PPOConfig(lr=2.5e-4, clip=0.1, epochs=epochs, minibatch=MINIBATCH, ent_coef=0.01, vf_coef=0.5)
    learner = PPOLearner(policy, value, config, T, B, (4, 84, 84), obs_dtype="uint8")
    # SB3's permutations index its rows env-major (b * T + t); rlgen's are step-major (t * B + b)
    perm = z["perms"]
    rows = (perm % T) * B + perm // T
    index = tf.constant(rows.reshape(-1, MINIBATCH).astype(np.int32))
    learner._minibatch_indices = lambda n: (index, tf.ones(index.shape))
    learner.update_fn = compile_update(learner, None)  # traced again, with SB3's permutations
    learner._call = flat_caller(learner.update_fn)

    done, zeros = z["D"], np.zeros((T, B), np.float32)
    next_values = np.concatenate([z["V"][1:], value.value(tf.constant(z["last"])).numpy()[None]])
    advantages = gae(z["R"], z["V"], next_values, done, done, 0.99, 0.95).numpy()
    print(f"one update of {epochs} epoch(s) over SB3's rollout of {T} x {B} real Breakout steps, from SB3's weights")
    print(f"GAE advantages: largest |rlgen - SB3| {np.abs(advantages - z['ADV']).max():.1e}")
    rollout = Rollout(z["O"], z["A"], z["R"], done, zeros, np.ones((T, B), np.float32), z["L"], z["V"])
    m = learner.update(rollout, z["last"], progress=0.0)
    pairs = [("policy_loss", "policy_gradient_loss"), ("value_loss", "value_loss"), ("approx_kl", "approx_kl")]
    pairs += [("clip_fraction", "clip_fraction")]
    for ours, theirs in pairs:
        print(f"{ours:<14} rlgen {m[ours]: .6f}  SB3 {float(z['log/' + theirs]): .6f}")
    print(f"{'entropy':<14} rlgen {m['entropy']: .6f}  SB3 {-float(z['log/entropy_loss']): .6f}")
    after = to_rlgen(z, 1)
    print("per variable: |rlgen - SB3| after the update / |SB3's change| (Euclidean norms)")
    print(" ".join(f"{n:>8}" for n in NAMES))
    ratios = [
        np.linalg.norm(v.numpy() - a) / max(float(np.linalg.norm(a - b)), 1e-12)
        for v, a, b in zip(net.trainable_variables, after, before, strict=True)
    ]
    print(" ".join(f"{r:8.1e}" for r in ratios))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sb3-python", help="an interpreter with stable-baselines3, torch and ale-py")
    ap.add_argument("--epochs", type=int, default=1, help="epochs of the update (default 1; the Zoo's is 4)")
    ap.add_argument("--sb3-half", type=Path, help=argparse.SUPPRESS)  # internal: run the SB3 half, write here
    args = ap.parse_args()
    if args.sb3_half:
        return sb3_half(args.sb3_half, args.epochs)
    if not args.sb3_python:
        ap.error("--sb3-python is required")
    in_two_halves(__file__, args.sb3_python, "--epochs", args.epochs, rlgen_half)


if __name__ == "__main__":
    sys.exit(main())
