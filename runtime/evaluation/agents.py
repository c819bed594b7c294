"""Evaluating a multi-agent policy (``env.pettingzoo``): whole episodes of every agent of each
env copy, on fresh copies of the PettingZoo env the spec names (:class:`ParallelVectorEnv`), or
for an in-graph env (``backend: tensorflow``) all at once in one compiled loop, as
:mod:`.episodes` does for a single-agent policy.

An episode's figures are the training episodes' (:mod:`rlgen.runtime.agents`): its ``return`` is
the mean over agents of each agent's return (what ``mean_return`` logs), its team return the sum
over agents (the return times the number of agents), and with several groups, a group's return
the mean over the group's agents (what ``<group>/return`` logs).

The policy acts as in training: ``act(obs)`` takes what ``env.reset()`` returns without a state
(one batch of rows ``b*N + i``, or with several groups one batch per group, group by group) and
returns the actions ``env.step()`` takes, likewise. A recurrent policy's act
(:class:`~rlgen.runtime.evaluation.episodes.RecurrentAct`) carries its state from zeros.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The frames per second of a recorded episode (mpe2 declares 10).
VIDEO_FPS = 10


@dataclass
class AgentReturns:
    """Returns of whole multi-agent episodes, one per episode (in copy order)."""

    returns: np.ndarray  # mean over agents of each agent's return
    lengths: np.ndarray  # joint env steps
    agents: int  # agents per env copy
    groups: dict[str, np.ndarray] = field(default_factory=dict)  # several groups: each one's mean agent return

    @property
    def team(self) -> np.ndarray:
        """The team return of each episode: the sum over agents of their returns."""
        return self.returns * self.agents


def evaluate_agents(
    act: Callable[[Any], Any],
    env: Mapping[str, Any],
    episodes: int,
    seed: int,
    rank: int,
    video: Path | None = None,
    name: str = "policy",
) -> AgentReturns:
    """``episodes`` complete episodes of ``act`` on copies of ``env["pettingzoo"]`` made with its
    ``kwargs`` and ``groups``, seeded as ``rank`` (evaluation's rank index); only each copy's
    first episode counts, so every episode starts from a fresh seeded reset. With ``video`` (a
    folder), one copy plays the episodes one after another, drawing ``rgb_array`` frames, and
    episode ``k`` is written to ``video_paths(video, name, episodes)[k]``."""
    from rlgen.runtime.agents import ParallelVectorEnv

    n = 1 if video is not None else max(1, min(int(episodes), 16))
    kwargs = dict(env.get("kwargs") or {})
    if video is not None:
        kwargs["render_mode"] = "rgb_array"
    vec = ParallelVectorEnv(
        env["pettingzoo"], num_envs=n, seed=seed, rank=rank, kwargs=kwargs, groups=env.get("groups")
    )
    groups = list(vec.groups.values())
    sizes = np.array([len(members) for members in groups])
    returns: list[float] = []
    lengths: list[int] = []
    by_group: list[list[float]] = [[] for _ in groups]
    try:
        while len(returns) < episodes:
            obs = vec.reset()
            if hasattr(act, "begin"):  # a recurrent policy: its state starts from zeros
                act.begin()
            frames = [_frame(vec, name)] if video is not None else []
            running = np.zeros((n, len(groups)), np.float64)  # each group's summed agent returns
            finished = np.zeros(n, bool)
            steps = 0
            while not finished.all():
                steps += 1
                actions = act(obs)
                out = vec.step(*([actions] if len(groups) == 1 else actions))
                parts = [out[4 * g : 4 * g + 4] for g in range(len(groups))]  # (obs, reward, terminated, truncated)
                obs = parts[0][0] if len(groups) == 1 else tuple(p[0] for p in parts)
                reward = np.stack([p[1].reshape(n, -1).sum(axis=1) for p in parts], axis=1)
                running += np.where(finished[:, None], 0.0, reward)
                flags = np.concatenate([(p[2] | p[3]).reshape(n, -1) for p in parts], axis=1)
                ended = flags.all(axis=1) & ~finished  # every agent's row flagged: the copy's episode ended
                if video is not None:
                    frames.append(_frame(vec, name))
                for b in np.flatnonzero(ended):
                    returns.append(float(running[b].sum() / sizes.sum()))
                    lengths.append(steps)
                    for g, size in enumerate(sizes):
                        by_group[g].append(float(running[b, g] / size))
                finished |= ended
            if video is not None:
                _write_video(frames, _video_path(video, name, len(returns) - 1))
    finally:
        vec.close()
    out = AgentReturns(np.asarray(returns[:episodes], np.float64), np.asarray(lengths[:episodes]), int(sizes.sum()))
    if len(groups) > 1:
        out.groups = {g: np.asarray(r[:episodes], np.float64) for g, r in zip(vec.groups, by_group, strict=True)}
    return out


def in_graph_agents(act: Callable[[Any], Any], env: Mapping[str, Any], episodes: int, seed: int) -> Callable[[], Any]:
    """The compiled evaluation of an in-graph multi-agent env: every copy's first episode, its
    return (mean over agents) once it ends; seeded with ``seed`` at every call."""
    import tensorflow as tf

    from rlgen.runtime.mpe.agent_env import make_tf_agent_env

    from .ingraph import episode_returns

    n = int(episodes)
    agent_env = make_tf_agent_env(env["pettingzoo"], n, seed=seed, kwargs=env.get("kwargs"))
    tf_env, agents = agent_env.env, agent_env.num_agents
    recurrent = hasattr(act, "initial_state")  # a RecurrentAct: the loop carries its state

    def reset():  # noqa: ANN202
        obs = agent_env.reset()
        if not recurrent:
            return obs
        return obs, act.initial_state(tf.constant(agent_env.num_rows, tf.int32)), tf.ones([agent_env.num_rows], tf.bool)

    def step(carry):  # noqa: ANN001, ANN202
        if recurrent:  # only each copy's first episode counts: `first` holds on the first step only
            obs, state, first = carry
            action, state = act.step(obs, state, first)
        else:
            action = act(carry)
        obs, reward, terminated, truncated = agent_env.step(action)
        reward = tf.reduce_mean(tf.reshape(tf.cast(reward, tf.float64), [n, agents]), axis=1)
        done = tf.reduce_all(tf.reshape(tf.logical_or(terminated, truncated), [n, agents]), axis=1)
        return ((obs, state, tf.zeros_like(first)) if recurrent else obs), reward, done

    return episode_returns(reset, step, tf_env.rng, seed, n, tf_env.max_episode_steps)


def _video_path(folder: Path, name: str, episode: int) -> Path:
    from .video import video_paths

    return video_paths(folder, name, episode + 1)[episode]


def _frame(vec: Any, what: str) -> np.ndarray:
    """The one copy's current frame (``rgb_array``), or :class:`VideoError` saying why there is none."""
    from .video import VideoError

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # mpe2 draws with pygame: no window needed
    try:
        frame = vec.envs[0].render()
    except Exception as exc:  # a missing drawing package, an env without rgb_array frames, ...
        raise VideoError(f"--video: {what} cannot draw frames ({type(exc).__name__}: {exc})") from None
    if not isinstance(frame, np.ndarray):
        raise VideoError(f"--video: the env draws {type(frame).__name__}, not an rgb_array image")
    return frame


def _write_video(frames: list[np.ndarray], path: Path) -> None:
    from moviepy import ImageSequenceClip

    path.parent.mkdir(parents=True, exist_ok=True)
    clip = ImageSequenceClip(frames, fps=VIDEO_FPS)
    clip.write_videofile(str(path), logger=None)
    clip.close()
