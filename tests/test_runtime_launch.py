"""The launcher's bookkeeping (failure reports, run directories) and the progress display."""

from __future__ import annotations

import io
import os
import time

import pytest

from rlgen.runtime.launch import BuildInfo, LaunchError, failure_report, prepare_run_dir
from rlgen.runtime.progress import Progress


def _rank(ranks, r, error=None, done=False, age=0.0):
    (ranks / f"{r}.pid").write_text("1\n")
    if error is not None:
        path = ranks / f"{r}.error"
        path.write_text(error + "\n\ntraceback...\n")
        t = time.time() - age
        os.utime(path, (t, t))
    if done:
        (ranks / f"{r}.done").write_text("{}\n")


def test_a_rank_that_died_silently_is_the_cause(tmp_path):
    _rank(tmp_path, 0, "UnknownError: stopped because another rank failed (Horovod shut down)")
    _rank(tmp_path, 1)
    text = failure_report(tmp_path, 1)
    assert text.startswith("rank 1 died without reporting an error")
    assert "1 other rank(s) stopped with it" in text


def test_the_earliest_error_is_the_cause(tmp_path):
    _rank(tmp_path, 0, "UnknownError: stopped because another rank failed", age=1)
    _rank(tmp_path, 1, "ValueError: bad observation", age=5)
    _rank(tmp_path, 2, done=True)
    assert failure_report(tmp_path, 1).startswith("rank 1 failed: ValueError: bad observation")


def test_no_rank_started(tmp_path):
    assert "before any rank started" in failure_report(tmp_path, 2)


def test_build_info_refuses_a_directory_that_is_not_a_build(tmp_path):
    with pytest.raises(LaunchError, match="not an rlgen build directory"):
        BuildInfo.read(tmp_path)


def test_run_directory_is_never_overwritten(tmp_path):
    (tmp_path / "old.txt").write_text("keep me")
    with pytest.raises(LaunchError, match="not empty"):
        prepare_run_dir(tmp_path, None, resume=False)  # type: ignore[arg-type]
    with pytest.raises(LaunchError, match="not a run directory"):
        prepare_run_dir(tmp_path, None, resume=True)  # type: ignore[arg-type]
    assert (tmp_path / "old.txt").read_text() == "keep me"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_one_line_on_a_terminal():
    out = _Tty()
    p = Progress(1000, stream=out)
    p.update({"env_steps": 500, "time": 10.0, "mean_return": 42.0}, final=True)
    p.finish({"stop_reason": "budget", "env_steps": 1000, "elapsed": 20.0, "mean_return": 50.0, "run_dir": "r"})
    text = out.getvalue()
    assert text.startswith("\r") and "500/1,000 env steps" in text and "50 steps/s" in text
    assert "ETA 0:10" in text and "return 42.0" in text
    assert text.rstrip().endswith("run directory r")


def test_progress_prints_plain_lines_at_most_every_interval_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(1000, stream=out, plain_every=3600)
    for step in range(100, 1000, 100):
        p.update({"env_steps": step, "time": step / 100, "mean_return": None})
    assert out.getvalue().count("\n") == 1 and "\r" not in out.getvalue()
    assert "return -" in out.getvalue()


def test_progress_prints_its_first_plain_line_on_a_freshly_booted_host(monkeypatch):
    """time.monotonic() counts from boot: a few seconds after boot the first line must still print."""
    monkeypatch.setattr("rlgen.runtime.progress.time.monotonic", lambda: 3.0)
    out = io.StringIO()
    Progress(1000, stream=out, plain_every=5.0).update({"env_steps": 100, "time": 1.0, "mean_return": None})
    assert out.getvalue().count("\n") == 1
