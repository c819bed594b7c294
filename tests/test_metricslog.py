"""metrics.jsonl's rows (rlgen.runtime.metricslog): one per iteration, or one per few short ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgen.runtime.metricslog import (
    ROW_ENV_STEPS,
    MetricsLog,
    iterations_per_row,
    per_iteration,
    read_metrics,
)


def _record(i: int, steps: int, learned: dict[str, float]) -> dict:
    return {
        "iteration": i,
        "env_steps": i * steps,
        "time": 0.01 * i,
        "steps_per_s": steps / 0.01,
        "episodes": i // 10,
        "mean_return": float(i),
        "time_env": 0.002,
        "time_update": 0.005 if learned else 0.0,
        **learned,
    }


def _feed(path: Path, steps: int, iterations: int, learn_from: int, end_at: tuple[int, ...] = ()) -> list[dict]:
    log = MetricsLog(path, iterations_per_row(steps), steps)
    for i in range(1, iterations + 1):
        learned = {"loss": float(i)} if i >= learn_from else {}
        log.add(_record(i, steps, learned), 0.01, learned, end_row=i in end_at)
    log.close()
    return read_metrics(path.parent)


@pytest.mark.parametrize("steps,every", [(1, 64), (8, 8), (40, 1), (64, 1), (2048, 1)])
def test_iterations_shorter_than_the_row_size_share_a_row(steps: int, every: int) -> None:
    assert iterations_per_row(steps) == every == max(1, ROW_ENV_STEPS // steps)


def test_long_iterations_get_a_row_each_and_it_is_the_record(tmp_path: Path) -> None:
    rows = _feed(tmp_path / "metrics.jsonl", 256, 5, learn_from=1)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[2] == {**_record(3, 256, {"loss": 3.0}), "iterations": 1}


def test_short_iterations_share_rows_with_summed_times_and_averaged_losses(tmp_path: Path) -> None:
    rows = _feed(tmp_path / "metrics.jsonl", 1, 300, learn_from=100, end_at=(250,))
    # the launch's first iteration and the first that learns (both trace) have rows of their own;
    # a row ends where asked (an evaluation, a checkpoint) and at the end
    assert [(r["iteration"], r["iterations"]) for r in rows] == [
        (1, 1),
        (65, 64),
        (99, 34),
        (100, 1),
        (164, 64),
        (228, 64),
        (250, 22),
        (300, 50),
    ]
    assert sum(r["iterations"] for r in rows) == 300
    row = rows[4]  # iterations 101..164
    assert row["env_steps"] == 164 and row["mean_return"] == 164.0 and row["episodes"] == 16  # as at its end
    assert row["loss"] == pytest.approx(sum(range(101, 165)) / 64)  # the mean over its iterations
    assert row["time_env"] == pytest.approx(64 * 0.002) and row["time_update"] == pytest.approx(64 * 0.005)
    assert row["steps_per_s"] == pytest.approx(64 / (64 * 0.01))
    assert "loss" not in rows[2]  # iterations 66..99 did not learn
    assert per_iteration(rows, "time_env") == pytest.approx(0.002)
    assert per_iteration(rows[3:], "time_update") == pytest.approx(0.005)


def test_a_nan_loss_is_left_out_of_its_rows_mean_and_an_all_nan_one_is_null(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl", 64, 1)
    losses = [1.0, None, 3.0, None, None]  # the session writes NaN as null (JSON has no NaN)
    for i, loss in enumerate(losses, start=1):
        learned = {"loss": loss, "q": None}
        log.add(_record(i, 1, learned), 0.01, learned, end_row=False)
    log.close()
    rows = read_metrics(tmp_path)
    assert [(r["iteration"], r["iterations"]) for r in rows] == [(1, 1), (5, 4)]
    assert rows[1]["loss"] == 3.0 and rows[1]["q"] is None


def test_close_writes_the_iterations_not_yet_written(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path, 64, 1)
    for i in range(1, 11):
        log.add(_record(i, 1, {}), 0.01, {}, end_row=False)
    assert [json.loads(line)["iteration"] for line in path.read_text().splitlines()] == [1]  # the first, alone
    log.close()
    log.close()  # a second close (a failure after the end) does nothing
    assert [(r["iteration"], r["iterations"]) for r in read_metrics(tmp_path)] == [(1, 1), (10, 9)]
