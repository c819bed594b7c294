"""The pixel examples run for real, on tiny budgets: PPO Breakout under ``single`` and
``actors-learner``, A2C Breakout under ``single``, the IMPALA shape under ``async-actors``
and DQN Pong past its learning start each end cleanly with a checkpoint, their observations
uint8 from the env to the update; the exported policy takes uint8 frames and ``rlgen eval``
plays it; a ``precision: bfloat16`` torso trains and exports bfloat16 convolutions.

Tiny settings: 2 envs of 32 steps, one epoch of minibatch 64 for PPO; 2 envs of 5 steps for
A2C; 2 envs of 8 steps on one actor for IMPALA; a 1,000-transition replay learning from step
40 for DQN; ``env.max_episode_steps`` caps the evaluations (under the atari preset it counts
ALE frames, 4 per agent step)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT

EXAMPLES = ROOT / "examples"

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

#: One short evaluation game: the budget every tiny run shares.
EVAL_TINY = ["--set", "train.eval.episodes=1", "--set", "env.max_episode_steps=400"]
PPO_TINY = [
    "--set",
    "env.num_envs=2",
    "--set",
    "loop.rollout.repeat=32",
    "--set",
    "components.learner.minibatch=64",
    "--set",
    "components.learner.epochs=1",
    *EVAL_TINY,
]
DQN_TINY = [
    "--set",
    "loop.learn.after=40",
    "--set",
    "loop.sync.after=40",
    "--set",
    "loop.sync.every_steps=20",
    "--set",
    "components.replay.capacity=1000",
    *EVAL_TINY,
]


def rlgen(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "rlgen", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "env_steps" in r]


def checkpointed(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("ckpt-*.index"))


def train_ppo(run_dir: Path, policy: str, *extra: str) -> None:
    spec = EXAMPLES / "ppo-breakout.rl.yaml"
    workers = ["--workers", 2] if policy != "single" else []
    args = ["--policy", policy, *workers, "--iterations", 2, *PPO_TINY, *extra, "--run-dir", run_dir]
    r = rlgen("run", spec, *args, cwd=run_dir.parent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("ppo-breakout-single") / "run"
    train_ppo(run_dir, "single")
    return run_dir


def check_trained(run_dir: Path, env_steps: int = 2 * 2 * 32) -> None:
    got = rows(run_dir)
    assert got[-1]["env_steps"] == env_steps
    assert all(math.isfinite(x["value_loss"]) and math.isfinite(x["policy_loss"]) for x in got)
    assert checkpointed(run_dir), list((run_dir / "checkpoints").iterdir())
    status = json.loads((run_dir / "run.json").read_text())
    assert status["status"] == "finished", status
    assert status["config"]["env"]["obs_dtype"] == "uint8" and status["config"]["env"]["preset"] == "atari"


def test_ppo_breakout_trains_under_single_and_checkpoints(single_run):
    check_trained(single_run)


def test_ppo_breakout_trains_under_actors_learner_and_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    train_ppo(run_dir, "actors-learner")
    check_trained(run_dir)


def test_a2c_breakout_trains_under_single_with_tf_like_rmsprop_and_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    args = ["--iterations", 2, "--set", "env.num_envs=2", *EVAL_TINY, "--run-dir", run_dir]
    r = rlgen("run", EXAMPLES / "a2c-breakout.rl.yaml", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    check_trained(run_dir, 2 * 2 * 5)
    learner = json.loads((run_dir / "spec.resolved.json").read_text())["components"]["learner"]
    assert learner["kind"] == "a2c" and learner["optimizer"]["tf_like"] is True


def test_the_impala_shape_trains_under_async_actors_with_vtrace_and_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    tiny = ["--set", "env.num_envs=2", "--set", "loop.rollout.repeat=8", *EVAL_TINY]
    args = ["--workers", 2, "--iterations", 3, *tiny, "--run-dir", run_dir]
    r = rlgen("run", EXAMPLES / "impala-breakout.rl.yaml", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    check_trained(run_dir, 3 * 2 * 8)
    assert json.loads((run_dir / "run.json").read_text())["policy"] == "async-actors"
    assert all("policy_lag" in x and "dropped" in x for x in rows(run_dir))
    spec = json.loads((run_dir / "spec.resolved.json").read_text())
    assert spec["components"]["learner"]["correction"] == "vtrace"
    assert spec["networks"]["torso"]["kind"] == "impala"


def test_the_exported_policy_takes_uint8_frames_and_rlgen_eval_plays_it(single_run, tmp_path):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(single_run / "policy"))
    (spec,) = loaded.act.concrete_functions[0].structured_input_signature[0]
    assert spec.dtype == tf.uint8 and tuple(spec.shape) == (None, 4, 84, 84)
    frames = np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    actions = loaded.act(tf.constant(frames)).numpy()
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1, 2, 3}
    e = rlgen("eval", single_run, "--episodes", 1, "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stdout[-2000:] + e.stderr[-3000:]
    result = json.loads(e.stdout.strip().splitlines()[-1])
    assert result["episodes"] == 1 and math.isfinite(result["mean_return"])


def test_a_bfloat16_torso_trains_checkpoints_and_its_exported_policy_computes_in_bfloat16(tmp_path):
    import tensorflow as tf

    run_dir = tmp_path / "run"
    train_ppo(run_dir, "single", "--set", "networks.torso.precision=bfloat16")
    check_trained(run_dir)
    loaded = tf.saved_model.load(str(run_dir / "policy"))
    graph = loaded.act.concrete_functions[0].graph
    convs = [op for op in graph.get_operations() if op.type == "Conv2D"]
    assert convs and {op.get_attr("T") for op in convs} == {tf.bfloat16}
    e = rlgen("eval", run_dir, "--episodes", 1, "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stdout[-2000:] + e.stderr[-3000:]
    assert math.isfinite(json.loads(e.stdout.strip().splitlines()[-1])["mean_return"])


def test_dqn_pong_learns_past_learning_starts_and_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    r = rlgen("run", EXAMPLES / "dqn-pong.rl.yaml", "--iterations", 25, *DQN_TINY, "--run-dir", run_dir, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    got = rows(run_dir)
    assert got[-1]["env_steps"] == 25 * 4
    learned = [x for x in got if x["env_steps"] > 40]
    assert learned and all("loss" in x and math.isfinite(x["loss"]) for x in learned), got[-1]
    assert checkpointed(run_dir)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_rlgen_eval_video_of_an_atari_run_shows_the_game_not_the_agents_frames(single_run, tmp_path):
    pytest.importorskip("moviepy", reason="the video extra (pip install 'rlgen[video]')")
    imageio = pytest.importorskip("imageio.v2")
    run = tmp_path / "run"  # a copy whose games end soon: an untrained Breakout policy may never serve
    shutil.copytree(single_run, run)
    doc = json.loads((run / "run.json").read_text())
    doc["config"]["env"]["max_episode_steps"] = 200
    (run / "run.json").write_text(json.dumps(doc))
    videos = tmp_path / "videos"
    e = rlgen("eval", run, "--episodes", 1, "--video", videos, "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stdout[-2000:] + e.stderr[-3000:]
    assert json.loads(e.stdout.strip().splitlines()[-1])["videos"] == [str(videos / "policy-episode-0.mp4")]
    with imageio.get_reader(videos / "policy-episode-0.mp4") as reader:
        frames = list(reader.iter_data())
    # ALE's own screen in colour (210 x 160 RGB), not the 84 x 84 grey stacks the agent sees
    assert frames[0].shape == (210, 160, 3) and len(frames) > 10
    assert np.ptp(frames[0].astype(int), axis=(0, 1)).max() > 0 and not np.array_equal(
        frames[0][..., 0], frames[0][..., 1]
    )
