"""The run directory (rlgen.runtime.rundir): run.json's one writer path and the one-trainer lock."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from rlgen.runtime.rundir import RunDir, RunDirBusy


def _writer(path: str, name: str, count: int) -> None:
    run = RunDir(path)
    for i in range(count):
        run.update({f"{name}-{i}": i}, status=f"{name} at {i}")
        assert isinstance(run.read(), dict)  # never a torn file


def test_concurrent_writers_lose_no_update_and_leave_no_temporary_file(tmp_path):
    """The launcher and rank 0 both update run.json at start-up; with one shared temporary name
    and no lock, one's update could be lost or a half-written file renamed into place."""
    RunDir(tmp_path).update(name="run")
    procs = [multiprocessing.Process(target=_writer, args=(str(tmp_path), n, 150)) for n in ("launcher", "rank0")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    doc = json.loads((tmp_path / "run.json").read_text())
    for name in ("launcher", "rank0"):
        assert all(doc[f"{name}-{i}"] == i for i in range(150))  # every update of both writers is there
    assert doc["name"] == "run"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run.json.lock", "run.json"]


def test_a_second_claim_names_the_live_holder_and_the_kernel_frees_a_dead_ones(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from rlgen.runtime.rundir import RunDir
                RunDir({str(tmp_path)!r}).claim("rlgen run")
                print("held", flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirBusy, match=rf"is in use by rlgen run \(pid {holder.pid} on .*, since "):
            RunDir(tmp_path).claim()
    finally:
        holder.kill()
        holder.wait()
    mine = RunDir(tmp_path)
    mine.claim()  # the holder died: its lock went with it
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    mine.release()


def test_a_fresh_directory_holds_only_what_its_claimer_put_there(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.fresh()
    run.claim()
    (run.builds / "single-1").mkdir(parents=True)
    assert run.fresh()
    (run.path / "metrics.jsonl").write_text("")
    assert not run.fresh()
    run.release()
