"""rlgen's horovodrun: Horovod's Gloo check answered by a probe of the op library, kept per
installation, instead of a TensorFlow import before every job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.launch import hvdrun

HOROVOD = Path(sys.executable).with_name("horovodrun").exists()
needs_horovod = pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")


@needs_horovod
def test_the_probe_agrees_with_horovods_own_check(tmp_path, monkeypatch):
    from horovod.common import util

    monkeypatch.setenv("RLGEN_CACHE_DIR", str(tmp_path))
    ops, tf_dir, _ = hvdrun._libraries()
    assert hvdrun._probe(ops, tf_dir) is True
    assert hvdrun.gloo_built() is util.gloo_built() is True


@needs_horovod
def test_the_answer_is_kept_per_installation_and_probed_again_when_a_library_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("RLGEN_CACHE_DIR", str(tmp_path))
    assert hvdrun.gloo_built() is True
    kept = tmp_path / "horovod-gloo.json"
    doc = json.loads(kept.read_text())
    assert doc["gloo_built"] is True
    assert any("mpi_lib" in Path(entry[0]).name for entry in doc["key"])
    # the kept answer is what is read while the libraries are the same ones ...
    kept.write_text(json.dumps({**doc, "gloo_built": False}))
    assert hvdrun.gloo_built() is False
    # ... and a library that changed (another size or time) is probed again
    doc["key"][0][2] += 1
    kept.write_text(json.dumps({**doc, "gloo_built": False}))
    assert hvdrun.gloo_built() is True
    kept.write_text("not json")
    assert hvdrun.gloo_built() is True


def test_a_probe_that_cannot_load_the_library_gives_no_answer(tmp_path):
    assert hvdrun._probe(tmp_path / "missing.so", tmp_path) is None


@needs_horovod
def test_the_launcher_runs_ranks_as_horovodrun_does(tmp_path):
    script = "import os; print('rank', os.environ['HOROVOD_RANK'], 'of', os.environ['HOROVOD_SIZE'])"
    out = subprocess.run(
        [sys.executable, "-m", "rlgen.launch.hvdrun", "--gloo", "-np", "2", "-H", "localhost:2",
         sys.executable, "-c", script],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "RLGEN_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rank 0 of 2" in out.stdout and "rank 1 of 2" in out.stdout
