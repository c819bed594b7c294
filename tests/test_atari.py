"""The atari preset against ale-py directly: frames, frame skip, reward clipping, life loss,
and whole-game unclipped scores in the vector env's statistics."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from rlgen.dsl import atari  # noqa: E402
from rlgen.runtime.envs import VectorEnv  # noqa: E402


def _play(env, steps, seed=0):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        out.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, _ = env.reset()
    return out


def test_preset_frames_are_stacked_84x84_uint8_from_ale():
    env = atari.make("ALE/Breakout-v5")
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
    assert env.unwrapped._frameskip == 1  # the preset skips frames itself, v5's own skip is off
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    nxt, *_ = env.step(0)
    np.testing.assert_array_equal(nxt[:3], obs[1:])  # a sliding stack: the replay shares frames
    # the newest frame is ALE's screen, grey, resized to 84x84 (max of the last two of 4 frames)
    import cv2

    grey = env.unwrapped.ale.getScreenGrayscale()
    assert np.abs(cv2.resize(grey, (84, 84), interpolation=cv2.INTER_AREA).astype(int) - nxt[-1]).mean() < 8
    env.close()


@pytest.mark.parametrize("training", [True, False])
def test_each_episode_starts_its_stack_with_zero_frames(training):
    """SB3's VecFrameStack zeroes an episode's stack: three zero frames, then the first screen,
    sliding out over the next three steps. In training a lost life ends the episode, so every
    life starts so; in evaluation a lost life keeps the stack (the game goes on)."""
    env = atari.make("ALE/Breakout-v5", {"repeat_action_probability": 0.0}, training=training)
    obs, info = env.reset(seed=0)
    rng, episodes, lives_lost, age = np.random.default_rng(0), 1, 0, 0
    for _ in range(600):
        zeros = [not frame.any() for frame in obs]
        assert zeros == [k < 3 - age for k in range(4)], (age, zeros)  # zeros only in a new stack
        obs, _, terminated, truncated, next_info = env.step(int(rng.integers(env.action_space.n)))
        lives_lost += next_info["lives"] < info["lives"]
        info, age = next_info, min(age + 1, 3)
        if terminated or truncated:
            (obs, info), episodes, age = env.reset(), episodes + 1, 0
    assert lives_lost >= 1 and episodes >= (3 if training else 1)  # the checks above met both cases
    env.close()


def test_rewards_clipped_for_training_and_unclipped_game_score_reported():
    env = atari.make("ALE/Breakout-v5", {"repeat_action_probability": 0.0})
    steps = _play(env, 1500)
    rewards = np.array([r for _, r, *_ in steps])
    assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
    games = [info for *_, info in steps if "game_score" in info]
    lives_lost = sum(1 for _, _, term, _, info in steps if term and "game_score" not in info)
    assert lives_lost >= 1  # a lost life ends a training episode without ending the game
    raw = atari.make("ALE/Breakout-v5", {"repeat_action_probability": 0.0}, training=False)
    unclipped = [r for _, r, *_ in _play(raw, 1500)]
    assert max(unclipped) >= 1.0  # Breakout's bricks score 1, 4 or 7: not clipped here
    assert all(g["game_score"] >= 0 and g["game_length"] > 0 for g in games)
    env.close()
    raw.close()


def test_vector_env_reports_whole_games():
    vec = VectorEnv("ALE/Breakout-v5", num_envs=2, seed=0, preset="atari")
    obs = vec.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    rng = np.random.default_rng(0)
    while len(vec.completed) < 1:
        vec.step(rng.integers(0, 4, 2))
    score, length = vec.completed[0]
    assert score >= 0 and length > 50  # a whole game: 5 lives of random play
    vec.close()


def _noop_game(env, limit=3000):
    """Steps of a no-op policy until the game ends (``None`` if it runs past ``limit``) and the
    number of episodes that ended on the way."""
    env.reset(seed=0)
    episodes = 0
    for t in range(limit):
        _, _, terminated, truncated, info = env.step(0)
        if terminated or truncated:
            episodes += 1
            if "game_score" in info:
                return t + 1, episodes
            env.reset()
    return None, episodes


@pytest.mark.parametrize("training", [True, False])
def test_fire_reset_serves_every_life(training):
    """Breakout waits for FIRE at the start of each life: the preset presses it (SB3's
    FireResetEnv), so a no-op policy loses its 5 lives in a few hundred steps, in training
    (5 episodes, one a life) and in evaluation (one episode, the whole game)."""
    env = atari.make("ALE/Breakout-v5", training=training)
    assert "FireReset" in str(env)
    steps, episodes = _noop_game(env)
    assert steps is not None and steps < 1000
    assert episodes == (5 if training else 1)
    env.close()
    raw = atari.atari(_ale("ALE/Breakout-v5"), training=training)  # without it the ball never comes
    raw = _without_fire(raw)
    assert _noop_game(raw, limit=600)[0] is None
    raw.close()


def _ale(env_id):
    import gymnasium as gym

    atari.register()
    return gym.make(env_id, frameskip=1)


def _without_fire(env):
    """The preset with its FireReset wrapper taken out of the chain."""
    outer = env
    while outer is not None:
        inner = getattr(outer, "env", None)
        if isinstance(inner, atari.FireReset):
            outer.env = inner.env
            return env
        outer = inner
    raise AssertionError("no FireReset in the preset")


def test_games_without_fire_get_no_fire_reset():
    env = atari.make("ALE/MsPacman-v5")
    assert not atari.fires(env) and "FireReset" not in str(env)
    env.close()


def test_ale_prints_nothing_unless_debugging(tmp_path) -> None:
    """ALE prints a banner for every env it makes; rlgen keeps it to errors (RLGEN_DEBUG shows it)."""
    import subprocess
    import sys

    from conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k != "RLGEN_DEBUG"}
    spec = ROOT / "examples" / "ppo-breakout.rl.yaml"
    cmd = [sys.executable, "-m", "rlgen", "build", str(spec), "-o", str(tmp_path / "b")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "A.L.E" not in r.stdout + r.stderr, r.stdout + r.stderr
    code = "from rlgen.dsl import atari; atari.make('ALE/Pong-v5').close()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "RLGEN_DEBUG": "1"})
    assert "A.L.E" in r.stdout + r.stderr  # the mechanism, not the host: debugging shows it again
