"""``--policy auto`` on pixels: the cost model counts uint8 frames a byte an element and the
Nature CNN's weights, and a heavy update that runs on every core under ``single`` (PPO
Breakout on 2 cores: the update 2.7 of an iteration's 3.7 s, benchmarks/pixels.py) is not
predicted to gain from actors that take its cores; a real auto run on a tiny Breakout
records its profile and its choice."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from test_auto import records

from rlgen.api import validate_file
from rlgen.app.auto import Chooser
from rlgen.app.costmodel import ALLREDUCE_S, BYTE_S, TRY, Profile, predict, traffic
from rlgen.app.history import History
from rlgen.codegen.policies import POLICIES
from rlgen.machine import cores_per_rank, local_cores

from conftest import ROOT

BREAKOUT = ROOT / "examples" / "ppo-breakout.rl.yaml"
FRAME = 4 * 84 * 84  # one env step's stacked uint8 frames
NATURE_CNN = 1_686_693  # its convolutions, 512-wide layer and the policy (4) and value heads


def breakout(threads: int) -> Profile:
    """PPO Breakout under single on the 2-core machine (quiet; benchmarks/pixels.py, per iteration)."""
    parts = {"inference": 0.37, "env": 0.63, "buffer": 0.0, "update": 2.73, "comm": 0.0, "loop": 0.0, "other": 0.0}
    return Profile(1024, 128, 16, parts, 1024 / 3.73, FRAME, 4 * NATURE_CNN, threads)


def test_pixels_cross_a_cut_a_byte_an_element_and_the_weights_are_the_nature_cnns():
    obs, weights = traffic(validate_file(BREAKOUT).spec)
    assert (obs, weights) == (FRAME, 4 * NATURE_CNN)  # not 4 bytes a pixel: frames stay uint8
    assert traffic(validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml").spec)[0] == 4 * 4  # float32
    # an iteration's frames through the learner's channel: 1,024 x 28,224 bytes, about 0.12 s
    profile = breakout(threads=1)
    actors = POLICIES["actors-learner"]
    free = predict(dataclasses.replace(profile, obs_bytes=0, weight_bytes=0), actors, 3, cores=2)
    assert 1024 / predict(profile, actors, 3, cores=2) - 1024 / free == pytest.approx(
        1024 * FRAME * BYTE_S + 2 * 4 * NATURE_CNN * BYTE_S, rel=0.01
    )


def test_a_heavy_update_on_every_core_is_not_predicted_to_gain_from_actors_that_take_a_core():
    """Measured: actors-learner (3) at 0.72x single's steps/s, its learner's update 5.1 s an
    iteration on the one thread its rank gets, against 2.7 s on single's two."""
    profile = breakout(threads=2)
    single = profile.steps_per_s
    for policy in ("actors-learner", "async-actors", "central-inference", "multi-learner"):
        for workers in (2, 3):
            assert predict(profile, POLICIES[policy], workers, cores=2) < TRY * single, (policy, workers)
    assert 0.55 * single < predict(profile, POLICIES["actors-learner"], 3, cores=2) < 0.8 * single
    # the same times read as one thread's (the model before it knew): a trial it would have lost
    assert predict(breakout(threads=1), POLICIES["actors-learner"], 3, cores=2) > TRY * single
    assert cores_per_rank(2, 3) == 1 and cores_per_rank(8, 3) == 2 and cores_per_rank(2, 1) == 2
    # on 8 cores two learners each take 4 threads and half the batch: each updates as long as
    # single's update on all 8, and they keep every core busy, plus the allreduces
    step = ALLREDUCE_S + 2 * 4 * NATURE_CNN * BYTE_S
    t = 0.37 + 0.63 / 2 + 2.73 + 16 * step
    assert predict(breakout(threads=8), POLICIES["multi-learner"], 2, cores=8) == pytest.approx(1024 / t)


def test_the_threads_a_single_run_updated_on_are_remembered_and_predicted_from(tmp_path):
    h = History("k", tmp_path)
    assert h.add("single", 1, records(275.0, n=6, env_share=0.3), threads=2)
    assert h.measured()[("single", 1)].threads == 2
    model = validate_file(BREAKOUT).spec
    c = Chooser(BREAKOUT, [("actors-learner", 3)], 999_424, 0, 0, tmp_path, cores=2, model=model, budget_s=0.0)
    c.note = lambda line: None
    assert c.recall(h)
    profile = c.record["profile"]
    assert (profile["threads"], profile["obs_bytes"], profile["weight_bytes"]) == (2, FRAME, 4 * NATURE_CNN)
    (actors,) = c.candidates  # its learner would update on one thread: predicted slower, not measured
    assert actors.predicted < 275.0 and actors.measured is None and c.choice.policy == "single"


def test_auto_on_a_tiny_breakout_profiles_uint8_frames_and_records_its_choice(tmp_path):
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    tiny = ["env.num_envs=2", "loop.rollout.repeat=32", "components.learner.minibatch=64"]
    tiny += ["components.learner.epochs=1", "train.eval.every=0"]
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlgen", "run", str(BREAKOUT), "--policy", "auto", "--iterations", "8"]
    cmd += ["--calibration-budget", "0", "--run-dir", str(run_dir), "--quiet"]  # no measurement runs: one process
    cmd += [arg for setting in tiny for arg in ("--set", setting)]
    env = {**os.environ, "RLGEN_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    doc = json.loads((run_dir / "run.json").read_text())
    auto = doc["auto"]
    profile = auto["profile"]
    assert (profile["obs_bytes"], profile["weight_bytes"]) == (FRAME, 4 * NATURE_CNN)
    assert profile["steps_per_iteration"] == 64 and profile["parts"]["update"] > 0
    assert profile["threads"] == cores_per_rank(local_cores(), 1)  # the Nature CNN's update is heavy
    assert auto["choice"] == {"policy": "single", "workers": 1} and auto["why"]  # nothing measured, nothing tried
    predicted = {(c["policy"], c["workers"]) for c in auto["candidates"] if c["predicted"]}
    assert ("actors-learner", 2) in predicted and doc["status"] == "finished"
