"""``backend: envpool``: the ``atari`` preset on envpool's C++ Atari envs (``pip install 'rlgen[envpool]'``).

``env: {id: ALE/Breakout-v5, backend: envpool}`` (the ``atari`` preset is implied) makes one
``envpool.make("Breakout-v5", env_type="gymnasium", num_envs=N, ...)`` for a rank's ``N`` envs,
with the settings of :data:`SETTINGS`, chosen to match rlgen.dsl.atari's wrappers as closely
as envpool allows: 1 to 30 no-ops on reset, frame skip 4 with the max of the last two frames,
84x84 grayscale (``INTER_AREA``), 4 frames stacked, v5's sticky actions (0.25), the minimal
action set, FIRE on reset in games that have it; a lost life ends the episode and, in
training, rewards are clipped to their sign. docs/language.md (Atari) lists where the two
backends still differ.

:class:`EnvPoolAtari` presents the pool as rlgen's ``VectorEnv`` steps a gymnasium vector env:
envpool already resets an env on the step after its episode ends (gymnasium's ``NEXT_STEP``:
that step's action is ignored, its reward is 0, both flags false), and the preset's
``game_score`` / ``game_length`` (the unclipped score and the length of a whole game, across
lives) come in ``info`` when a game ends, summed from envpool's unclipped ``info["reward"]``.
Evaluation plays whole games as episodes: envpool presses FIRE only on a reset, so its pool
keeps a lost life as an episode end (the reset that follows presses FIRE, as in training) and
the adapter does not report it (``games=True``): that reset step is one more step of the game.
envpool starts an episode's frame stack with its first screen repeated (or, after a lost life, the
last frames of that life); the adapter zeroes the frames older than the episode, so that each
stack starts as the gymnasium preset's and SB3's ``VecFrameStack``: three zero frames, then the
first screen (in evaluation, at the start of a game only, as the gymnasium preset keeps the stack
over a lost life).
TensorFlow-free: ``validate`` reads the spaces here, env ranks step through it.
"""

from __future__ import annotations

import importlib.util
import math
import re
from typing import Any

import numpy as np

#: envpool's Atari settings for the preset (training; evaluation turns clipping off).
SETTINGS: dict[str, Any] = {
    "noop_max": 30,
    "frame_skip": 4,
    "stack_num": 4,
    "img_height": 84,
    "img_width": 84,
    "gray_scale": True,
    "use_inter_area_resize": True,
    "use_fire_reset": True,  # FIRE on every reset (after each lost life too), in games that have it
    "repeat_action_probability": 0.25,  # ALE v5's sticky actions (envpool's default is 0)
    "full_action_space": False,
    "episodic_life": True,
    "reward_clip": True,
}
#: ``env.kwargs`` that envpool takes under ALE's names (others are refused by ``validate``).
KWARGS = ("repeat_action_probability", "full_action_space", "mode", "difficulty")
INSTALL_HINT = "pip install 'rlgen[envpool]'"
_ALE_ID = re.compile(r"ALE/([A-Za-z0-9]+)-v5")


def task_id(env_id: str | None) -> str | None:
    """envpool's name of an ALE id (``ALE/Breakout-v5`` -> ``Breakout-v5``); None for others."""
    found = _ALE_ID.fullmatch(env_id or "")
    return f"{found.group(1)}-v5" if found else None


def installed() -> bool:
    return importlib.util.find_spec("envpool") is not None


def known_tasks() -> list[str]:
    """envpool's Atari task ids (``Breakout-v5``, ...)."""
    import envpool

    return [t for t in envpool.list_all_envs() if t.endswith("-v5") and "/" not in t]


def settings(kwargs: dict[str, Any] | None = None, training: bool = True, max_episode_steps: int | None = None):
    """What ``envpool.make`` is given. ``max_episode_steps`` counts ALE frames, as under the
    gymnasium backend (its time limit wraps the ``frameskip=1`` env); envpool counts agent steps,
    so it gets the frames divided by the frame skip (its default, 27,000, is v5's 108,000 frames)."""
    out = {**SETTINGS, **{k: v for k, v in (kwargs or {}).items() if k in KWARGS}}
    if not training:  # unclipped; whole games, the adapter hides life-loss ends (FIRE needs them)
        out.update(reward_clip=False)
    if max_episode_steps is not None:
        out["max_episode_steps"] = max(1, math.ceil(max_episode_steps / SETTINGS["frame_skip"]))
    return out


def spaces(env_id: str, kwargs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The gymnasium observation and action spaces of one env (``[4, 84, 84]`` uint8, Discrete)."""
    import envpool

    spec = envpool.make_spec(task_id(env_id), **settings(kwargs))
    return spec.observation_space, spec.action_space


def make(
    env_id: str,
    num_envs: int,
    seed: int,
    kwargs: dict[str, Any] | None = None,
    training: bool = True,
    max_episode_steps: int | None = None,
) -> EnvPoolAtari:
    """``num_envs`` envs in one synchronous pool; env ``i`` is seeded ``seed + i`` (envpool's rule)."""
    import envpool

    made = settings(kwargs, training, max_episode_steps)
    pool = envpool.make(task_id(env_id), env_type="gymnasium", num_envs=num_envs, seed=int(seed), **made)
    return EnvPoolAtari(pool, num_envs, games=not training)


class EnvPoolAtari:
    """An envpool Atari pool as a gymnasium vector env with ``NEXT_STEP`` autoreset, reporting
    each ended game's unclipped score and length in ``info`` as rlgen.dsl.atari's ``GameScore``.
    ``games``: a lost life is not reported as the end of an episode (evaluation's whole games)."""

    def __init__(self, pool: Any, num_envs: int, games: bool = False) -> None:
        self.pool, self.num_envs, self.games = pool, int(num_envs), bool(games)
        self.single_observation_space = pool.single_observation_space
        self.single_action_space = pool.single_action_space
        self._score = np.zeros(self.num_envs, np.float64)
        self._length = np.zeros(self.num_envs, np.int64)
        self._done = np.zeros(self.num_envs, bool)
        self._fresh = np.zeros(self.num_envs, bool)  # the next step starts a new frame stack
        self._age = np.zeros(self.num_envs, np.int64)  # frames of its episode in each env's stack

    def _in_order(self, info: dict[str, Any], *rows: np.ndarray) -> list[np.ndarray]:
        """Rows by env index (a synchronous pool returns them so; kept safe if it did not)."""
        ids = np.asarray(info["env_id"])
        if np.array_equal(ids, np.arange(self.num_envs)):
            return [np.asarray(r) for r in rows]
        order = np.argsort(ids)
        return [np.asarray(r)[order] for r in rows]

    def reset(self, seed: Any = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        """New games in every env (seeds were given when the pool was made)."""
        obs, info = self.pool.reset()
        (obs,) = self._in_order(info, obs)
        self._score[:], self._length[:], self._done[:], self._fresh[:] = 0.0, 0, False, False
        self._age[:] = 1
        return self._zero_padded(obs), {}

    def _zero_padded(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` with each stack's frames from before its episode zeroed (a copy where any is)."""
        stale = np.maximum(obs.shape[1] - self._age, 0)
        if not stale.any():
            return obs
        obs = obs.copy()
        for i in np.flatnonzero(stale):
            obs[i, : stale[i]] = 0
        return obs

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.pool.step(np.asarray(action, np.int32))
        obs, reward, terminated, truncated, raw, game_over = self._in_order(
            info, obs, reward, terminated, truncated, info["reward"], info["terminated"]
        )
        valid = ~self._done  # a reset step is no transition: its reward and step are not the game's
        self._score += np.where(valid, raw, 0.0)
        self._length += valid
        done = np.logical_or(terminated, truncated)
        ended = done & (game_over.astype(bool) | truncated)  # a lost life ends an episode, not a game
        info = {"game_score": self._score.copy(), "game_length": self._length.copy(), "_game_score": ended}
        self._score[ended], self._length[ended] = 0.0, 0
        self._age = np.where(self._fresh, 1, self._age + 1)
        obs = self._zero_padded(obs)
        self._done, self._fresh = done, ended if self.games else done
        if self.games:  # the pool's next step is its reset (FIRE), a step of the same game
            terminated = terminated & ended
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.pool.close()
