"""``backend: envpool`` against ``backend: gymnasium``: both give ``[B, 4, 84, 84]`` uint8 frames,
the same spaces and clipped rewards in {-1, 0, 1} under rlgen's step convention (the step after an
episode's end resets: no transition), whole unclipped games in the statistics; validate refuses
what envpool cannot run (E436); PPO Breakout trains two tiny iterations on envpool.

The adapter's own bookkeeping is tested on a fake pool, so it runs without envpool; the rest
skips when envpool (or ale-py, for the gymnasium side) is not installed."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from rlgen.api import validate_text
from rlgen.dsl import atari_envpool
from rlgen.dsl.atari_envpool import EnvPoolAtari

from conftest import ROOT

needs_envpool = pytest.mark.skipif(
    not (atari_envpool.installed() and importlib.util.find_spec("ale_py") and importlib.util.find_spec("cv2")),
    reason="needs envpool (pip install 'rlgen[envpool]') and ale-py (rlgen[atari])",
)
SPEC = (ROOT / "examples" / "ppo-breakout.rl.yaml").read_text(encoding="utf-8")


def test_ale_ids_map_to_envpool_tasks():
    assert atari_envpool.task_id("ALE/Breakout-v5") == "Breakout-v5"
    assert atari_envpool.task_id("ALE/Pong-v5") == "Pong-v5"
    for other in ("CartPole-v1", "BreakoutNoFrameskip-v4", "ALE/Breakout-v4", None):
        assert atari_envpool.task_id(other) is None


def test_settings_match_the_preset():
    s = atari_envpool.settings()
    assert (s["noop_max"], s["frame_skip"], s["stack_num"], s["img_height"], s["img_width"]) == (30, 4, 4, 84, 84)
    assert s["episodic_life"] and s["reward_clip"] and s["gray_scale"] and s["use_fire_reset"]
    assert s["repeat_action_probability"] == 0.25 and not s["full_action_space"]
    evaluation = atari_envpool.settings(training=False, max_episode_steps=401)
    # evaluation keeps the life-loss reset (envpool presses FIRE only there), unclipped
    assert evaluation["episodic_life"] and evaluation["use_fire_reset"] and not evaluation["reward_clip"]
    assert evaluation["max_episode_steps"] == 101  # ALE frames -> agent steps of 4 frames
    assert atari_envpool.settings({"repeat_action_probability": 0.0})["repeat_action_probability"] == 0.0


class FakePool:
    """Two envs answering in reverse order: env 1 loses a life at step 1, then its game ends at step 3."""

    single_observation_space = single_action_space = None

    def __init__(self) -> None:
        self.t = 0

    def reset(self):
        return np.array([[1], [0]]), {"env_id": np.array([1, 0])}

    def step(self, action):
        self.t += 1
        t = self.t
        term = np.array([t in (1, 3), False])  # rows: env 1, env 0
        info = {"env_id": np.array([1, 0]), "reward": np.array([4.0, 1.0]), "terminated": np.array([t == 3, 0])}
        return np.array([[1], [0]]), np.sign(info["reward"]), term, np.zeros(2, bool), info

    def close(self) -> None:
        pass


def test_adapter_orders_rows_and_reports_whole_unclipped_games():
    env = EnvPoolAtari(FakePool(), 2)
    obs, _ = env.reset()
    assert obs[:, 0].tolist() == [0, 1]  # rows by env index
    games = []
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(np.zeros(2, np.int32))
        assert reward.tolist() == [1.0, 1.0] and obs[:, 0].tolist() == [0, 1]
        games.append(info["_game_score"].tolist())
    assert games == [[False, False], [False, False], [False, True]]  # a lost life is no game end
    # env 1: steps 1 and 3 count (step 2 resets after the lost life), unclipped 4 each
    assert info["game_score"][1] == 8.0 and info["game_length"][1] == 2


def test_adapter_for_evaluation_ends_episodes_with_games_only():
    env = EnvPoolAtari(FakePool(), 2, games=True)
    env.reset()
    ends = [env.step(np.zeros(2, np.int32))[2].tolist() for _ in range(3)]
    assert ends == [[False, False], [False, False], [False, True]]  # env 1's lost life is hidden


class StackPool(FakePool):
    """FakePool's episodes with stacks of 4 frames that are never zero, as envpool's."""

    def reset(self):
        obs, info = super().reset()
        return np.full((2, 4, 1), 9, np.uint8), info

    def step(self, action):
        _, *rest = super().step(action)
        return np.full((2, 4, 1), 9, np.uint8), *rest


@pytest.mark.parametrize(
    ("games", "zeros"),
    [
        (False, [[3, 3], [2, 2], [1, 3], [0, 2], [0, 3]]),  # env 1: new stacks after its lost life and its game
        (True, [[3, 3], [2, 2], [1, 1], [0, 0], [0, 3]]),  # evaluation: after its game only
    ],
)
def test_adapter_zeroes_frames_from_before_the_episode(games, zeros):
    """Each stack starts as the gymnasium preset's (SB3's VecFrameStack): three zero frames, then
    the first screen; the zeros slide out over the next three steps."""
    env = EnvPoolAtari(StackPool(), 2, games=games)
    stacks = [env.reset()[0], *(env.step(np.zeros(2, np.int32))[0] for _ in range(4))]
    seen = [[int((stack[i, :, 0] == 0).sum()) for i in range(2)] for stack in stacks]
    assert seen == zeros
    for stack in stacks:  # zeros only before the frames kept
        for i in range(2):
            kept = stack[i, :, 0] != 0
            assert kept[np.argmax(kept) :].all() and kept[-1]


@needs_envpool
def test_envpool_presses_fire_on_reset_without_sticky_actions():
    """A no-op policy loses its lives only if the game serves the ball: envpool's FIRE on reset
    does it in every env without sticky actions (with v5's, the single FIRE frame can be lost)."""
    n = 8
    env = atari_envpool.make("ALE/Breakout-v5", n, 0, {"repeat_action_probability": 0.0})
    env.reset()
    lost = np.zeros(n, bool)
    for _ in range(150):
        lost |= env.step(np.zeros(n, np.int32))[2]
    env.close()
    assert lost.all()


@needs_envpool
@pytest.mark.parametrize("training", [True, False])
def test_envpool_stacks_start_with_zero_frames_as_the_gymnasium_preset(training):
    """The same check as tests/test_atari.py's for the gymnasium preset, on envpool's real frames."""
    n = 2
    env = atari_envpool.make("ALE/Breakout-v5", n, 0, {"repeat_action_probability": 0.0}, training=training)
    obs, _ = env.reset()
    rng, age, done = np.random.default_rng(0), np.zeros(n, np.int64), np.zeros(n, bool)
    ends = 0
    for _ in range(600):
        for i in range(n):
            zeros = [not frame.any() for frame in obs[i]]
            assert zeros == [k < 3 - age[i] for k in range(4)], (i, age[i], zeros)
        obs, _, terminated, truncated, _ = env.step(rng.integers(0, 4, n).astype(np.int32))
        age = np.where(done, 0, age + 1)  # the step after an end (NEXT_STEP) is the new episode's first
        done = terminated | truncated
        ends += int(done.sum())
    assert ends >= (2 if training else 1)
    env.close()


def test_envpool_not_installed_is_e436(monkeypatch):
    monkeypatch.setattr(atari_envpool, "installed", lambda: False)
    result = validate_text(SPEC.replace("  preset: atari\n", "  backend: envpool\n"), "ppo-breakout.rl.yaml")
    (d,) = [d for d in result.diagnostics if d.code == "E436"]
    assert "not installed" in d.message and "pip install 'rlgen[envpool]'" in d.hint


@needs_envpool
def test_envpool_spec_validates_and_refuses_what_envpool_cannot_run():
    assert validate_text(SPEC.replace("  preset: atari\n", "  backend: envpool\n"), "a.rl.yaml").ok
    bad = SPEC.replace("  preset: atari\n", "  backend: envpool\n  kwargs: {obs_type: rgb}\n  wrappers: [ClipReward]\n")
    codes = [(d.code, d.json_path) for d in validate_text(bad, "a.rl.yaml").diagnostics]
    assert ("E436", "$.env.kwargs.obs_type") in codes and ("E436", "$.env.wrappers[0]") in codes


def _steps(backend: str, n: int = 300):
    from rlgen.runtime.envs import VectorEnv

    env = VectorEnv("ALE/Breakout-v5", num_envs=2, seed=3, preset="atari", backend=backend, max_episode_steps=800)
    rng = np.random.default_rng(0)
    obs = [env.reset()]
    rewards, resets, done = [], [], np.zeros(2, bool)
    for _ in range(n):
        o, r, terminated, truncated = env.step(rng.integers(0, env.action_space.n, 2))
        obs.append(o)
        rewards.append(r)
        resets.append((done.copy(), env.valid.copy(), r.copy(), terminated | truncated))
        done = terminated | truncated
    games = env.drain_episodes()
    spaces = (env.observation_space, env.action_space)
    env.close()
    return obs, np.array(rewards), resets, games, spaces


@needs_envpool
def test_both_backends_give_the_same_frames_spaces_and_reward_scale():
    runs = {b: _steps(b) for b in ("gymnasium", "envpool")}
    (g_obs, g_rew, _, _, g_spaces), (e_obs, e_rew, resets, games, e_spaces) = runs.values()
    assert g_spaces == e_spaces
    assert e_spaces[0].shape == (4, 84, 84) and e_spaces[0].dtype == np.uint8 and e_spaces[1].n == 4
    for obs in (*g_obs, *e_obs):
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    for rewards in (g_rew, e_rew):
        assert rewards.dtype == np.float32 and set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
    # envpool's autoreset is rlgen's step convention: after an episode ends, one reset step
    ended_before = [(valid, r, flags) for done, valid, r, flags in resets if done.any()]
    assert ended_before, "no episode ended in 300 steps of 200-step games"
    for done, valid, r, flags in resets:
        assert (valid == ~done).all() and (r[done] == 0).all() and not flags[done].any()
    # whole games (200 agent steps at most: 800 frames), unclipped scores
    assert games and all(0 < length <= 200 and score >= 0 for score, length in games)


@needs_envpool
def test_ppo_breakout_runs_two_iterations_on_envpool(tmp_path):
    from test_pixels_run import PPO_TINY, rlgen, rows

    run_dir = tmp_path / "run"
    spec = ROOT / "examples" / "ppo-breakout.rl.yaml"
    args = ["--iterations", 2, "--set", "env.backend=envpool", *PPO_TINY, "--run-dir", run_dir]
    r = rlgen("run", spec, *args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert [x["env_steps"] for x in rows(run_dir)] == [64, 128]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["run"]["env"]["backend"] == "envpool"  # evaluated on envpool too
    env_py = next((run_dir / "build").rglob("env.py")).read_text()
    assert 'backend="envpool"' in env_py
