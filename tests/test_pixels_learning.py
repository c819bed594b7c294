"""benchmarks/pixels_learning.py: how it reads ``sb3_atari.py --learn-steps``' JSON lines and
places rlgen against SB3's seeds (TensorFlow-free)."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def pl(monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # benchmarks/ is not a package
    return importlib.import_module("pixels_learning")


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_reads_sb3_lines(pl, tmp_path: Path) -> None:  # noqa: ANN001
    games = [{"kind": "episode", "step": 8 * i, "score": float(i), "length": 100} for i in range(150)]
    evals = [
        {"kind": "eval", "step": 100352, "scores": [1, 2, 3, 4, 5], "final": False, "deterministic": False},
        {"kind": "eval", "step": 200704, "scores": [2.0] * 5, "final": False, "deterministic": False},
        {"kind": "eval", "step": 250880, "scores": [10.0] * 5 + [20.0] * 5, "final": True, "deterministic": False},
        {"kind": "eval", "step": 250880, "scores": [7.0] * 10, "final": True, "deterministic": True},
    ]
    done = {"kind": "done", "step": 250880, "wall_s": 99.0}
    side = pl.read_sb3(_write(tmp_path / "sb3.jsonl", [{"kind": "start"}, *games, *evals, done]), 3)
    assert (side.seed, side.finished, side.env_steps, side.train_s) == (3, True, 250880, 99.0)
    assert side.train_games == 150 and side.train_last100 == pytest.approx(sum(range(50, 150)) / 100)
    # the sampled final evaluation ends the curve; the likeliest action's is the final one
    assert [(e.step, e.mean, e.games) for e in side.evals] == [(100352, 3.0, 5), (200704, 2.0, 5), (250880, 15.0, 10)]
    assert side.evals[0].sd == pytest.approx(2**0.5)  # over the games (numpy's sd, as rlgen's)
    assert (side.final.mean, side.final.sd, side.final.games) == (7.0, 0.0, 10)
    # the training curve: the last 100 games by a step (games 1..100 by step 800), none past the run
    assert side.train_at(800) == pytest.approx(50.5) and side.train_at(300_000) is None
    assert json.loads(json.dumps(dataclasses.asdict(side)))["train_curve"][1] == [8, 0.5]  # --json writes it
    # a run still going: no final evaluation yet, not finished
    side = pl.read_sb3(_write(tmp_path / "part.jsonl", [{"kind": "start"}, *games[:20], evals[0]]), 1)
    assert not side.finished and side.final is None and side.env_steps == 100352
    assert side.train_last100 == pytest.approx(sum(range(20)) / 20) and len(side.evals) == 1


def test_verdict(pl) -> None:  # noqa: ANN001
    assert "above" in pl.verdict([30.0], [10.0, 20.0])
    assert "within" in pl.verdict([10.0, 14.0], [10.0, 20.0])  # rlgen's mean over seeds, 12
    assert "below" in pl.verdict([9.0], [10.0, 20.0])
    assert "no verdict" in pl.verdict([], [10.0])


def test_dqn_runs_the_dqn_example_on_breakout_against_sb3s_dqn(pl, tmp_path: Path) -> None:  # noqa: ANN001
    """--algo dqn: rlgen's DQN example with Breakout's id and evaluations at SB3's steps; SB3's DQN."""
    import yaml

    rlgen, sb3 = pl.commands(pl.ALGOS["dqn"], 2, 499712, tmp_path, "SB3_PY", 10)
    assert rlgen[rlgen.index("run") + 1].endswith("examples/dqn-pong.rl.yaml")
    sets = [rlgen[i + 1] for i, a in enumerate(rlgen) if a == "--set"]
    assert sets[:3] == ["train.total_steps=499712", "env.id=ALE/Breakout-v5", f"train.eval.every={pl.EVAL_EVERY}"]
    assert sb3[:4] == ["SB3_PY", str(pl.SB3_SCRIPT), "--algo", "dqn"] and "--resume" not in sb3
    spec = yaml.safe_load(pl.ALGOS["dqn"].spec.read_text())
    assert spec["env"]["num_envs"] == pl.ALGOS["dqn"].envs == 1 and spec["train"]["eval"]["deterministic"]
    assert pl.EVAL_EVERY % pl.ALGOS["dqn"].iteration == 0  # an evaluation falls on an iteration's end
    ppo = pl.commands(pl.ALGOS["ppo"], 1, 1024, tmp_path, "SB3_PY", 10)[0]
    assert [a for a in ppo if a.startswith("train.") or a.startswith("env.")] == ["train.total_steps=1024"]
    report = pl.report([], 499712, 10, pl.ALGOS["dqn"])
    assert report.startswith("DQN Breakout") and "the greedy action" in report and "1 env(s)" in report


def test_reads_rlgens_closing_evaluation_from_run_json(pl, tmp_path: Path) -> None:  # noqa: ANN001
    """The periodic evaluations are metrics rows; the closing one at the run's end is run.json's."""
    run = tmp_path / "rlgen"
    run.mkdir()
    rows = [
        {"iteration": i, "env_steps": 1024 * i, "time": float(i), "episodes": 3 * i, "mean_return": float(i)}
        for i in range(1, 5)
    ]
    rows[1].update(eval_mean_return=2.5, eval_std_return=0.5, eval_env_steps=2048)
    _write(run / "metrics.jsonl", rows)
    doc = {"status": "finished", "config": {"eval_episodes": 5}, "final_eval": {"mean_return": 7.5, "std": 1.5}}
    (run / "run.json").write_text(json.dumps(doc))
    side = pl.read_rlgen(run, 1, episodes=0, timeout=1.0)
    assert [(e.step, e.mean, e.sd, e.games) for e in side.evals] == [(2048, 2.5, 0.5, 5), (4096, 7.5, 1.5, 5)]
