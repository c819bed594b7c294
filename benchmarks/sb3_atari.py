"""Stable-Baselines3's PPO on Breakout with the RL Zoo's Atari settings, timed per iteration:
the other side of ``benchmarks/pixels.py --sb3-python``.

Run with an interpreter that has stable-baselines3 (2.9), torch, ale-py and gymnasium (SB3 is
not a dependency of rlgen), e.g. ``/path/to/sb3-venv/bin/python benchmarks/sb3_atari.py``. The
env is the one rlgen's ``atari`` preset makes: ``ALE/Breakout-v5`` with ``frameskip=1`` (v5's
sticky actions, 0.25, kept) under SB3's ``AtariWrapper`` (no-op reset up to 30, frame skip 4,
life loss as episode end, FIRE on every reset, reward clipping, 84x84 grey) and
``VecFrameStack(4)``, 8 envs in one process (``DummyVecEnv``, as ``make_atari_env``). PPO:
``CnnPolicy``, 128 steps, 4 epochs of minibatch 256, lr and clip linear from 2.5e-4 and 0.1,
vf 0.5, ent 0.01. It prints one JSON line: env steps/s over iterations 2..N and the seconds of
their rollouts and updates.

    python benchmarks/sb3_atari.py [--iterations 4] [--seed 1]

``--algo dqn`` (with ``--learn-steps`` only): SB3's DQN with the Zoo's Atari settings instead
(``CnnPolicy``, one env, replay 100k, learning from 100k steps, train every 4, target every
1,000, lr 1e-4, epsilon to 0.01 over 10%), evaluated with the greedy action. Its stop saves the
replay buffer beside the model (``--save`` with ``.replay.pkl``, about 5.6 GB: SB3 keeps obs and
next obs of 100k transitions), and ``--resume`` loads both, so a resumed run learns from the
transitions it had gathered, as one that never stopped.

With ``--learn-steps N`` it trains for N env steps instead (the linear schedules run over N, as
rlgen's over ``train.total_steps``) and writes JSON lines to ``--out``: every training game's
unclipped score (``{"kind": "episode", "step", "score", "length"}``, from the ``Monitor`` that
``make_atari_env`` puts under the ``AtariWrapper``, so a game is all its lives and its length
is in ALE frames, 4 an agent step; rlgen's game lengths are in agent steps), an evaluation
every ``--eval-every`` env steps (as rlgen's ``train.eval``: after the update that reaches the
step; sampled actions, as the spec's ``deterministic: false``) and two at the end
(``{"kind": "eval", "step", "scores", "final", "deterministic"}``: sampled actions, then the
likeliest, as ``rlgen eval``'s exported policy), and a closing ``{"kind": "done", ...}``; the
trained model goes to ``--save`` (default: ``--out`` with ``.zip``). SIGTERM or SIGINT stops it
at the start of the next iteration with the model saved there (``{"kind": "stopped"}``, exit
143 or 130; the games under way are lost), and ``--resume`` with the same arguments goes on
from there (the schedules too) in fresh envs; ``--eval-only`` appends the final evaluations
(PPO's two, DQN's greedy one) of the model saved where it stopped, or at the end. Evaluations run
``evaluate_policy`` on a separate env built the same way (seed ``--eval-seed``, one env a game);
it counts the ``Monitor``'s episode returns, so a score is the unclipped full game, as
``rlgen eval`` reports it.

    python benchmarks/sb3_atari.py --learn-steps 499712 --seed 1 --out sb3-s1.jsonl \
        [--eval-every 100352] [--eval-episodes 5] [--final-episodes 10]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import ale_py
import gymnasium
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.evaluation import evaluate_policy
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


class Learning(BaseCallback):
    """Training games' scores, and an evaluation at every multiple of ``every`` env steps, as JSON lines."""

    def __init__(self, out, eval_seed: int, every: int, episodes: int, deterministic: bool, wall: float = 0.0) -> None:
        super().__init__()
        self.out, self.eval_seed, self.every = out, eval_seed, every
        self.episodes, self.deterministic = episodes, deterministic
        self.started = time.perf_counter() - wall  # wall: seconds of the run before a --resume
        self.stop_asked = self.stopping = False  # SIGTERM or SIGINT: stop at the next rollout's start
        self.boundary = 0  # env steps at the last rollout's start

    def write(self, record: dict) -> None:
        record["wall_s"] = round(time.perf_counter() - self.started, 1)
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def evaluate(self, episodes: int, final: bool) -> None:
        # A fresh env each time: the AtariWrapper's reset after a game left unfinished by the last
        # evaluation would only take a no-op step, and that game would run on under this one.
        # One env a game, so that each plays exactly one from its reset (no bias to short games).
        env = make_env(self.eval_seed, n_envs=episodes)
        scores, lengths = evaluate_policy(
            self.model,
            env,
            n_eval_episodes=episodes,
            deterministic=self.deterministic,
            return_episode_rewards=True,
            warn=False,
        )
        env.close()
        self.write(
            {
                "kind": "eval",
                "step": self.num_timesteps,
                "scores": [float(x) for x in scores],
                "lengths": [int(x) for x in lengths],
                "final": final,
                "deterministic": self.deterministic,
            }
        )

    def _on_rollout_start(self) -> None:  # after the previous iteration's update
        self.boundary = steps = self.model.num_timesteps
        if self.stop_asked:  # whole iterations only: the first step of this rollout is dropped
            self.stopping = True
        elif steps and steps % self.every == 0:
            self.evaluate(self.episodes, final=False)

    def _on_step(self) -> bool:
        if self.stopping:
            return False
        for info in self.locals["infos"]:
            if "episode" in info:  # the Monitor's whole game, all lives, unclipped
                ep = info["episode"]
                self.write(
                    {"kind": "episode", "step": self.num_timesteps, "score": float(ep["r"]), "length": int(ep["l"])}
                )
        return True


def dqn(env, seed: int) -> DQN:
    """SB3's DQN with the RL Zoo's Atari settings (one env: the Zoo's n_envs default)."""
    return DQN(
        "CnnPolicy",
        env,
        buffer_size=100_000,
        learning_rate=1e-4,
        batch_size=32,
        learning_starts=100_000,
        target_update_interval=1000,
        train_freq=4,
        gradient_steps=1,
        exploration_fraction=0.1,
        exploration_final_eps=0.01,
        optimize_memory_usage=False,
        seed=seed,
        device="cpu",
        verbose=0,
    )


def make_env(seed: int, n_envs: int = 8, **env_kwargs):
    """The comparisons' SB3 env: ``make_atari_env`` (the Zoo's ``AtariWrapper``) on Breakout-v5
    with ``frameskip=1`` and ``env_kwargs``, under ``VecFrameStack(4)``."""
    kwargs = {**env_kwargs, "frameskip": 1}
    return VecFrameStack(make_atari_env("ALE/Breakout-v5", n_envs=n_envs, seed=seed, env_kwargs=kwargs), n_stack=4)


def learn(args: argparse.Namespace, model: PPO | DQN) -> int:
    """Train to ``--learn-steps`` (from the saved model with ``--resume``); on SIGTERM or SIGINT,
    save the model (and DQN's replay) at the last whole iteration and return 143 (130), for
    ``--resume``."""
    save = args.save or str(Path(args.out).with_suffix(".zip"))
    replay = str(Path(save).with_suffix(".replay.pkl"))  # DQN's: the model's zip leaves it out
    wall = 0.0
    kind = type(model)
    greedy = kind is DQN  # DQN's evaluations take the greedy action, as rlgen's DQN example's
    if args.eval_only:  # the final evaluations of a stopped run's saved model, where it stopped
        model = kind.load(save, env=model.get_env(), device="cpu")
        with open(args.out, "a") as out:
            cb = Learning(out, args.eval_seed, args.eval_every, args.eval_episodes, deterministic=greedy)
            cb.init_callback(model)
            cb.num_timesteps = model.num_timesteps
            if not greedy:  # as at the end of learn() below: DQN's evaluations are greedy already
                cb.evaluate(args.final_episodes, final=True)
            cb.deterministic = True
            cb.evaluate(args.final_episodes, final=True)
        return 0
    if args.resume:
        lines = [json.loads(ln) for ln in Path(args.out).read_text().splitlines() if ln.strip()]
        if lines and lines[-1]["kind"] == "done":
            return 0
        wall = max((rec.get("wall_s", 0.0) for rec in lines), default=0.0)
        model = kind.load(save, env=model.get_env(), device="cpu")
        if kind is DQN:
            model.load_replay_buffer(replay)
    with open(args.out, "a" if args.resume else "w") as out:
        cb = Learning(out, args.eval_seed, args.eval_every, args.eval_episodes, deterministic=greedy, wall=wall)
        signals = {signal.SIGTERM: 143, signal.SIGINT: 130}
        code = 0

        def stop(signum: int, _frame: object) -> None:
            nonlocal code
            cb.stop_asked, code = True, signals[signum]

        for signum in signals:
            signal.signal(signum, stop)
        if args.resume:
            held = model.replay_buffer.size() if kind is DQN else None
            cb.write({"kind": "resumed", "step": model.num_timesteps, "replay": held})
        else:
            cb.write({"kind": "start", "seed": args.seed, "steps": args.learn_steps, "eval_seed": args.eval_seed})
        model.learn(total_timesteps=args.learn_steps - model.num_timesteps, callback=cb, reset_num_timesteps=False)
        if cb.stopping:
            model.num_timesteps = cb.boundary  # the dropped step does not count (nor is it stored)
            model.save(save)
            if kind is DQN:
                model.save_replay_buffer(replay)
            cb.write({"kind": "stopped", "step": cb.boundary})
            return code
        if model.num_timesteps % args.eval_every == 0:  # the last rollout_start did not come
            cb.evaluate(args.eval_episodes, final=False)
        model.save(save)
        if not greedy:
            cb.evaluate(args.final_episodes, final=True)  # stochastic, as the periodic ones
        cb.deterministic = True  # and as `rlgen eval` (the exported policy takes the likeliest action)
        cb.evaluate(args.final_episodes, final=True)
        cb.write({"kind": "done", "step": model.num_timesteps})
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", choices=("ppo", "dqn"), default="ppo", help="dqn: with --learn-steps only")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--learn-steps", type=int, help="train this many env steps, writing --out")
    ap.add_argument("--out", help="JSON lines of training games and evaluations (with --learn-steps)")
    ap.add_argument("--eval-every", type=int, default=100352, help="env steps between evaluations")
    ap.add_argument("--eval-episodes", type=int, default=5, help="games a periodic evaluation plays")
    ap.add_argument("--final-episodes", type=int, default=10, help="games the final evaluation plays")
    ap.add_argument("--save", help="where the trained model goes (default: --out with .zip)")
    ap.add_argument("--resume", action="store_true", help="go on from --save and --out (a stopped run)")
    ap.add_argument("--eval-only", action="store_true", help="only the final evaluations, of --save (a stopped run)")
    ap.add_argument("--eval-seed", type=int, default=10_000, help="seed of the evaluation envs")
    args = ap.parse_args()
    if args.learn_steps and not args.out:
        ap.error("--learn-steps needs --out")
    if args.algo == "dqn" and not args.learn_steps:
        ap.error("--algo dqn: with --learn-steps (the speed comparison is PPO's)")
    gymnasium.register_envs(ale_py)  # the ALE/ namespace
    if args.algo == "dqn":
        sys.exit(learn(args, dqn(make_env(args.seed, n_envs=1), args.seed)))
    env = make_env(args.seed)
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
    if args.learn_steps:
        sys.exit(learn(args, model))
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
