"""The launcher's bookkeeping (failure reports, run directories) and the progress display."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from rlgen.launch.job import BuildInfo, LaunchError, prepare_run_dir
from rlgen.runtime.lifeline import EXIT_ABORTED, Event, Switchboard
from rlgen.runtime.progress import Progress
from rlgen.runtime.rundir import RunDir


def _board_events(board: Switchboard, until, timeout: float = 5.0) -> list[Event]:
    events: list[Event] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end and not until(events):
        events += board.poll(0.05)
    return events


def test_a_rank_whose_connection_drops_without_a_word_died():
    board = Switchboard()
    try:
        host, port, token = board.address.rsplit(":", 2)
        sock = socket.create_connection((host, int(port)))
        sock.sendall(json.dumps({"kind": "hello", "rank": 1, "token": token, "pid": 42, "host": "h"}).encode() + b"\n")
        events = _board_events(board, lambda ev: any(e.kind == "hello" for e in ev))
        sock.close()
        events += _board_events(board, lambda ev: any(e.kind == "died" for e in ev))
        assert [(e.kind, e.rank) for e in events] == [("hello", 1), ("died", 1)]
        assert board.ranks[1].pid == 42 and board.ranks[1].ended == "died"
    finally:
        board.close()


def test_a_rank_that_reports_an_error_or_finishes_did_not_die():
    board = Switchboard()
    try:
        host, port, token = board.address.rsplit(":", 2)
        socks = []
        for rank, last in ((0, {"kind": "error", "reason": "ValueError: bad"}), (1, {"kind": "done"})):
            s = socket.create_connection((host, int(port)))
            hello = {"kind": "hello", "rank": rank, "token": token}
            s.sendall((json.dumps(hello) + "\n" + json.dumps({**last, "rank": rank}) + "\n").encode())
            s.close()
            socks.append(s)
        events = _board_events(board, lambda ev: sum(e.kind in ("error", "done") for e in ev) == 2)
        kinds = {(e.kind, e.rank) for e in events}
        assert ("error", 0) in kinds and ("done", 1) in kinds and not any(e.kind == "died" for e in events)
        assert board.ranks[0].reason == "ValueError: bad"
    finally:
        board.close()


def test_a_connection_without_the_token_is_not_a_rank():
    board = Switchboard()
    try:
        host, port, _ = board.address.rsplit(":", 2)
        s = socket.create_connection((host, int(port)))
        s.sendall(json.dumps({"kind": "hello", "rank": 0, "token": "guess"}).encode() + b"\n")
        events = _board_events(board, lambda ev: False, timeout=0.5)
        s.close()
        events += _board_events(board, lambda ev: False, timeout=0.3)
        assert events == [] and board.ranks == {}
    finally:
        board.close()


_RANK = """
import sys, time
from rlgen.runtime import lifeline
lifeline.ORPHAN_GRACE = 0.5
heard = []
line = lifeline.Lifeline(sys.argv[1], 3, heard.append)
while not heard:
    time.sleep(0.01)
print(heard[0], flush=True)
time.sleep(30)
"""


def test_ranks_hear_an_interrupt_and_exit_when_the_launcher_is_gone():
    """A real rank process: Ctrl-C reaches it as `interrupt`; killing the launcher ends it within the grace."""
    board = Switchboard()
    proc = subprocess.Popen([sys.executable, "-c", _RANK, board.address], stdout=subprocess.PIPE, text=True)
    try:
        assert any(e.kind == "hello" and e.rank == 3 for e in _board_events(board, lambda ev: ev, timeout=20))
        board.tell("interrupt")
        assert proc.stdout.readline().strip() == "interrupted"
        board.close()  # the launcher is gone
        assert proc.wait(timeout=10) == EXIT_ABORTED
    finally:
        if proc.poll() is None:
            proc.kill()
        board.close()


def test_build_info_refuses_a_directory_that_is_not_a_build(tmp_path):
    with pytest.raises(LaunchError, match="not an rlgen build directory"):
        BuildInfo.read(tmp_path)


def test_run_directory_is_never_overwritten(tmp_path):
    (tmp_path / "old.txt").write_text("keep me")
    with pytest.raises(LaunchError, match="not empty"):
        prepare_run_dir(RunDir(tmp_path), None, resume=False)  # type: ignore[arg-type]
    with pytest.raises(LaunchError, match="not a run directory"):
        prepare_run_dir(RunDir(tmp_path), None, resume=True)  # type: ignore[arg-type]
    assert (tmp_path / "old.txt").read_text() == "keep me"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_one_line_on_a_terminal_and_rates_leave_out_the_first_iteration():
    out = _Tty()
    p = Progress(1000, stream=out)
    p.update({"env_steps": 100, "time": 6.0, "mean_return": 20.0}, final=True)  # 6 s: mostly tracing
    assert "ETA -" in out.getvalue()
    p.update({"env_steps": 500, "time": 10.0, "mean_return": 42.0}, final=True)
    p.finish({"stop_reason": "budget", "env_steps": 1000, "elapsed": 20.0, "mean_return": 50.0, "run_dir": "r"})
    text = out.getvalue()
    assert text.startswith("\r") and "500/1,000 env steps" in text
    assert "100 steps/s" in text and "ETA 0:05" in text and "return 42.0" in text  # not 50 steps/s, ETA 0:10
    assert text.rstrip().endswith("run directory r")


def test_quiet_keeps_only_the_closing_line():
    out = io.StringIO()
    p = Progress(1000, enabled=False, stream=out)
    p.update({"env_steps": 500, "time": 10.0, "mean_return": 42.0}, final=True)
    p.note("a note")
    p.finish({"stop_reason": "budget", "env_steps": 1000, "elapsed": 20.0, "mean_return": 50.0, "run_dir": "r"})
    assert out.getvalue().startswith("done (budget): 1,000 env steps") and out.getvalue().count("\n") == 1
    silent = io.StringIO()
    Progress(1000, enabled=False, stream=silent, final_line=False).finish({"env_steps": 1, "run_dir": "r"})
    assert silent.getvalue() == ""


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


def _detached_sleep(seconds: float) -> int:
    """The pid of a process that sleeps, not this one's child (as a rank is not the launcher's)."""
    sleep = f"import time; time.sleep({seconds})"
    quiet = "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL"  # or run() waits for its pipe
    code = f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {sleep!r}], {quiet}).pid)"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_a_one_host_job_returns_only_when_its_ranks_have_ended(monkeypatch):
    """horovodrun can end while a rank it told to stop still writes its checkpoint: the launcher
    waits for such a rank, and kills one that outlives the grace (real processes as the ranks)."""
    from types import SimpleNamespace

    from rlgen.launch import watch
    from rlgen.runtime.lifeline import RankState

    monkeypatch.setattr(watch, "RANK_EXIT_S", 5.0)

    def reap(*pids: int) -> float:
        ranks = {r: RankState(r, pid) for r, pid in enumerate(pids)}
        job = SimpleNamespace(spans_hosts=False, board=SimpleNamespace(ranks=ranks))
        started = time.monotonic()
        watch.Job._reap_ranks(job)
        return time.monotonic() - started

    ending = _detached_sleep(1.5)
    waited = reap(ending)
    assert not watch._running(ending) and 1.0 < waited < 4.5  # waited for it to end by itself
    stuck = _detached_sleep(60)
    try:
        waited = reap(stuck)
        end = time.monotonic() + 5
        while watch._running(stuck) and time.monotonic() < end:
            time.sleep(0.05)
        assert not watch._running(stuck) and waited >= 5.0  # killed once the grace ran out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stuck, 9)
