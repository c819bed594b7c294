"""A run and an evaluation leave nothing in the temporary directory.

Autograph writes the source of each function it converts to a temporary file and removes it
in an exit handler, which rlgen's processes skip (``os._exit``, see rlgen.runtime.tfimport):
every run used to leave a few ``__autograph_generated_file*.py`` in ``/tmp``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "ppo-cartpole.rl.yaml"


def rlgen(*args, tmpdir: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(tmpdir)}
    cmd = [sys.executable, "-m", "rlgen", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_run_with_evaluations_and_rlgen_eval_leave_no_temporary_file(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    run = tmp_path / "run"
    r = rlgen("run", EXAMPLE, "--iterations", 4, "--set", "train.eval.every=512", "--run-dir", run, "--quiet",
              tmpdir=tmpdir, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "final eval" in r.stdout  # the evaluator process ran (and exported the policy)
    e = rlgen("eval", run, "--episodes", 2, tmpdir=tmpdir, cwd=tmp_path)
    assert e.returncode == 0, e.stderr[-2000:]
    assert sorted(p.name for p in tmpdir.iterdir()) == []
