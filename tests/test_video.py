"""``rlgen eval RUN_DIR --video DIR``: a short CartPole run's evaluated episodes recorded as mp4
files (gymnasium's RecordVideo; moviepy, the ``video`` extra, writes them), and the one-line
errors when they cannot be recorded."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from test_run_e2e import rlgen, spec

from rlgen.cli import main

ENVS = """\
import gymnasium


def make():
    return gymnasium.make("CartPole-v1")


def make_drawn(render_mode=None):
    return gymnasium.make("CartPole-v1", render_mode=render_mode)
"""


def needs_the_video_extra():
    pytest.importorskip("moviepy", reason="the video extra (pip install 'rlgen[video]')")
    pytest.importorskip("pygame", reason="the video extra (pip install 'rlgen[video]')")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-iteration PPO CartPole run (``policy/`` exported)."""
    root = tmp_path_factory.mktemp("video-run")
    with pytest.MonkeyPatch.context() as mp:  # its speeds out of the user's cache, as conftest does per test
        mp.setenv("RLGEN_CACHE_DIR", str(root / "cache"))
        r = rlgen("run", spec(root), "--run-dir", root / "run", "--iterations", 2, "--quiet", cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "run"


def with_env(run_dir: Path, to: Path, **env) -> Path:
    """A copy of ``run_dir`` with ``env`` in its env config (the same CartPole made another way)."""
    shutil.copytree(run_dir, to)
    doc = json.loads((to / "run.json").read_text())
    doc["config"]["env"].update(env)
    (to / "run.json").write_text(json.dumps(doc))
    return to


def test_each_evaluated_episode_is_an_mp4_of_that_episode(run_dir, tmp_path, monkeypatch):
    needs_the_video_extra()
    imageio = pytest.importorskip("imageio.v2")
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # SDL's windowed drivers would complain
    cwd, videos = tmp_path / "cwd", tmp_path / "videos"
    cwd.mkdir()
    r = rlgen("eval", run_dir, "--episodes", 3, "--seed", 7, "--video", videos, "--json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    out = json.loads(r.stdout)
    names = [f"policy-episode-{k}.mp4" for k in range(3)]
    assert out["episodes"] == 3 and out["videos"] == [str(videos / name) for name in names]
    assert sorted(p.name for p in videos.iterdir()) == names
    steps = []
    for name in names:
        assert (videos / name).read_bytes()[4:8] == b"ftyp"  # an MP4 container
        with imageio.get_reader(videos / name) as reader:
            frames = list(reader.iter_data())  # (the reader itself claims an infinite len)
        assert frames[0].shape == (400, 600, 3) and frames[0].std() > 0  # CartPole drawn, not a blank
        steps.append(len(frames) - 1)  # the reset's frame, then one per step
    # CartPole pays 1 per step, so the videos show the very episodes whose returns were printed
    # (give or take the last frame, which moviepy's rounding of the clip's duration may drop)
    assert 3 * out["mean_return"] - 3 <= sum(steps) <= 3 * out["mean_return"]
    assert out["min"] - 1 <= min(steps) <= out["min"] and out["max"] - 1 <= max(steps) <= out["max"]
    assert list(cwd.iterdir()) == []  # nothing written where it ran


def test_a_factory_env_is_recorded_when_it_takes_render_mode_and_named_when_not(run_dir, tmp_path):
    needs_the_video_extra()
    (tmp_path / "myenvs.py").write_text(ENVS)
    drawn = with_env(run_dir, tmp_path / "drawn", id=None, factory="myenvs:make_drawn")
    r = rlgen("eval", drawn, "--episodes", 2, "--video", tmp_path / "v", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"2 videos in {tmp_path / 'v'}/" in r.stdout
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["policy-episode-0.mp4", "policy-episode-1.mp4"]
    plain = with_env(run_dir, tmp_path / "plain", id=None, factory="myenvs:make")
    r = rlgen("eval", plain, "--episodes", 2, "--video", tmp_path / "w", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("rlgen eval: error: --video: myenvs:make makes envs with render_mode None")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "w").exists()


def test_an_in_graph_env_run_is_recorded_on_gymnasiums_env(run_dir, tmp_path):
    needs_the_video_extra()
    in_graph = with_env(run_dir, tmp_path / "in-graph", backend="tensorflow")
    r = rlgen("eval", in_graph, "--episodes", 1, "--video", tmp_path / "v", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["videos"] == [str(tmp_path / "v" / "policy-episode-0.mp4")]


def test_an_env_that_fails_to_draw_is_a_video_error(tmp_path):
    needs_the_video_extra()
    from rlgen.runtime.evaluation.episodes import VideoError, evaluate

    class NoContext(gym.Wrapper):
        def render(self):
            raise RuntimeError("no OpenGL context")

    def make(render_mode=None):
        return NoContext(gym.make("CartPole-v1", render_mode=render_mode))

    with pytest.raises(VideoError, match=r"cannot draw frames \(RuntimeError: no OpenGL context\)"):
        evaluate(lambda obs: np.zeros(len(obs), np.int64), {"factory": make}, 1, 0, tmp_path / "v")
    assert not (tmp_path / "v").exists()


def test_without_moviepy_video_names_the_extra_to_install(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    (run / "policy").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"config": {"env": {"id": "CartPole-v1"}}}))
    (run / "policy" / "saved_model.pb").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "moviepy", None)  # `import moviepy` raises ImportError
    assert main(["eval", str(run), "--video", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "rlgen eval: error: --video needs moviepy: install the video extra "
        "(pip install 'rlgen[video]'; scripts/setup.sh does)\n"
    )
    assert not (tmp_path / "v").exists()
