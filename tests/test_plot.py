"""``rlgen plot``: learning curves from run directories (matplotlib, drawn for real)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlgen.app.plot import groups, plot, read_run

pytest.importorskip("matplotlib")


def fake_run(root: Path, name: str, seed: int, lr: float = 1e-3, evals: bool = True, dqn: bool = False) -> Path:
    """A run directory as `rlgen run` writes it: metrics.jsonl, run.json, spec.resolved.json."""
    run = root / name
    run.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, 41):
        row = {"iteration": i, "env_steps": 256 * i, "time": 0.1 * i + 2.0, "mean_return": 20 + 10 * i + rng.normal()}
        row.update({"loss": 1.0 / i, "q": 0.5 * i} if dqn else {"policy_loss": -0.01 / i, "value_loss": 5.0 / i})
        if evals and i % 10 == 0:
            row["eval_mean_return"] = 25 + 10 * i
        rows.append(row)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"name": "cartpole", "policy": "single", "workers": 1}))
    learner = {"kind": "dqn" if dqn else "ppo", "lr": lr}
    spec = {"name": "cartpole", "components": {"learner": learner}, "train": {"seed": seed, "run_dir": "runs"}}
    (run / "spec.resolved.json").write_text(json.dumps(spec))
    return run


def test_runs_that_differ_only_by_seed_are_one_group_and_other_settings_are_not(tmp_path):
    runs = [read_run(fake_run(tmp_path, f"s{seed}", seed)) for seed in (0, 1, 2)]
    runs.append(read_run(fake_run(tmp_path, "other-lr", 0, lr=3e-4)))
    assert [len(g) for g in groups(runs)] == [3, 1]
    assert runs[0].losses == ["policy_loss", "value_loss"]


def test_plot_writes_png_svg_and_pdf_of_several_runs(tmp_path):
    dirs = [fake_run(tmp_path, f"s{seed}", seed) for seed in (0, 1)] + [fake_run(tmp_path, "dqn", 0, dqn=True)]
    for suffix in ("png", "svg", "pdf"):
        out = plot(dirs, tmp_path / f"curves.{suffix}")
        assert out.stat().st_size > 5000
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "curves.svg").read_text()
    assert "2 seeds: mean, min-max" in svg and "value loss" in svg and "loss" in svg


def test_the_command_line_names_what_it_cannot_plot(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([sys.executable, "-m", "rlgen", "plot", str(empty)], capture_output=True, text=True)
    assert r.returncode == 2 and "no metrics.jsonl" in r.stderr and "Traceback" not in r.stderr
    run = fake_run(tmp_path, "run", 0)
    r = subprocess.run([sys.executable, "-m", "rlgen", "plot", str(run), "-o", "x.txt"], capture_output=True, text=True)
    assert r.returncode == 2 and "png" in r.stderr
    r = subprocess.run([sys.executable, "-m", "rlgen", "plot", str(run)], capture_output=True, text=True)
    assert r.returncode == 0 and (run / "curves.png").is_file()


def test_a_caller_can_wait_for_a_finished_runs_detached_drawing(tmp_path):
    """What ``rlgen bench`` does before its next row and before it removes its runs: a drawing
    that lands after the wait began is waited for; none drawn, the wait ends at its timeout."""
    from rlgen.app.child import draw_curves, drawn

    run = fake_run(tmp_path, "r", 0)
    draw_curves(run, run / "curves.png", run / "plot.log")
    assert drawn(run / "curves.png", timeout=120) and (run / "curves.png").stat().st_size > 0
    assert not drawn(tmp_path / "never.png", timeout=0.3)
