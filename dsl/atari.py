"""The ``atari`` env preset: the RL Zoo's ``AtariWrapper`` built from gymnasium's wrappers.

``env: {id: ALE/Breakout-v5, preset: atari}`` makes ``gymnasium.make(id, frameskip=1, **kwargs)``
(ALE's v5 envs skip 4 frames themselves; the preset's frame skip replaces theirs, so the agent
acts every 4 frames, not every 16; v5's sticky actions, ``repeat_action_probability=0.25``, are
kept unless ``kwargs`` set them) and wraps it, innermost first, in:

1. ``AtariPreprocessing``: up to 30 no-op actions on reset, frame skip 4 with the max of the last
   two frames, 84x84 grayscale uint8 (``INTER_AREA``), no scaling;
2. :class:`GameScore`: the unclipped score and length of each *game*, reported in ``info`` when
   the game ends (what training statistics and ``rlgen eval`` report, as the Zoo's ``Monitor``);
3. :class:`EpisodicLife` (training): a lost life ends the episode (``terminated``) but not the
   game: the next reset takes one no-op step instead of restarting (SB3's ``EpisodicLifeEnv``);
4. :class:`FireReset`, in games with a FIRE action: every life starts with FIRE, then action 2
   (SB3's ``FireResetEnv``, which the Zoo's ``AtariWrapper`` adds for such games). In training
   it acts on each reset, so after each lost life too; in evaluation, where a game is one
   episode, it also acts after a lost life: a no-op, FIRE, then 2, as training's reset does;
5. :class:`ClipReward` (training): rewards become their sign, -1, 0 or 1;
6. ``FrameStackObservation(4, padding_type="zero")``: observations ``[4, 84, 84]`` uint8; an
   episode's first stack is three zero frames and its first screen, as SB3's ``VecFrameStack``
   (the Zoo's frame stack) starts one. In training each life is an episode, so each life starts so.

TensorFlow-free: ``validate`` applies it to read the spaces, env ranks to step.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

PRESETS = ("atari",)
#: What the preset sets on ``gymnasium.make`` (the user's ``kwargs`` win, except ``frameskip``).
ATARI_MAKE = {"frameskip": 1}


def register() -> None:
    """Register ALE's envs with gymnasium (``ale-py``: ``pip install rlgen[atari]``). ALE's
    banner and its info lines, printed by every env it makes, are kept to errors unless
    ``RLGEN_DEBUG`` is set: no command prints a third-party log line by default."""
    import ale_py

    if not os.environ.get("RLGEN_DEBUG"):
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    gym.register_envs(ale_py)


class GameScore(gym.Wrapper):
    """Sums the unclipped rewards and counts the steps of one game across lives; when the game
    ends, ``info["game_score"]`` and ``info["game_length"]`` carry them."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._score, self._length = 0.0, 0

    def reset(self, **kwargs: Any):
        self._score, self._length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._score += float(reward)
        self._length += 1
        if terminated or truncated:
            info = {**info, "game_score": self._score, "game_length": self._length}
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life is the end of an episode for the learner; reset after one continues the game
    with a no-op step (a real reset only after the game is over)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives, self._game_over = 0, True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any):
        if self._game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self._game_over = False
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Starts every life with FIRE, then action 2: games such as Breakout wait for FIRE before
    they go on, so without it an agent must first learn to press it (SB3's ``FireResetEnv``).
    ``reset`` acts after the inner reset, a new game or (under :class:`EpisodicLife`) a lost
    life; with ``after_life_loss`` (no :class:`EpisodicLife` below: a game is one episode)
    ``step`` also takes a no-op, FIRE and 2 after a step that lost a life, their rewards added
    to that step's. Only for games whose action 1 is FIRE (:func:`fires`)."""

    def __init__(self, env: gym.Env, after_life_loss: bool = False) -> None:
        super().__init__(env)
        self.after_life_loss = after_life_loss
        self._lives = 0

    def reset(self, **kwargs: Any):
        self.env.reset(**kwargs)
        obs, info = self._fire()
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info

    def _fire(self):
        """FIRE then 2 (a reset again, unseeded, if either ends the episode, as SB3)."""
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if self.after_life_loss and 0 < lives < self._lives and not (terminated or truncated):
            for extra in (0, 1, 2):
                obs, more, terminated, truncated, info = self.env.step(extra)
                reward += more
                if terminated or truncated:
                    break
            lives = self.env.unwrapped.ale.lives()
        self._lives = lives
        return obs, reward, terminated, truncated, info


def fires(env: gym.Env) -> bool:
    """Whether ``env``'s game waits for FIRE: action 1 is FIRE and it has at least 3 actions
    (SB3's test for ``FireResetEnv``)."""
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


class ClipReward(gym.RewardWrapper):
    """Rewards become their sign (-1, 0 or 1), as DQN's and the Zoo's Atari training."""

    def reward(self, reward):
        return float(np.sign(reward))


def atari(env: gym.Env, training: bool = True, noop_max: int = 30, frame_skip: int = 4, stack: int = 4) -> gym.Env:
    """Wrap an ALE env made with ``frameskip=1`` in the preset (``training=False``: whole games
    as episodes, each life started with FIRE where the game has it, no reward clipping)."""
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=frame_skip, screen_size=84, terminal_on_life_loss=False, grayscale_obs=True
    )
    env = GameScore(env)
    if training:
        env = EpisodicLife(env)
    if fires(env):
        env = FireReset(env, after_life_loss=not training)
    if training:
        env = ClipReward(env)
    return gym.wrappers.FrameStackObservation(env, stack, padding_type="zero")


def make(env_id: str, kwargs: dict[str, Any] | None = None, training: bool = True, **make_kwargs: Any) -> gym.Env:
    """One preset env: ``gymnasium.make(env_id, frameskip=1, **kwargs)`` wrapped by :func:`atari`."""
    register()
    return atari(gym.make(env_id, **{**dict(kwargs or {}), **ATARI_MAKE, **make_kwargs}), training=training)
