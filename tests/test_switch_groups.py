"""A run with several agent groups goes on under another policy from the checkpoint it left:
``agent-groups`` from a whole learner module's checkpoint (each group restores its part), and
``single`` from ``agent-groups``' checkpoints (the module from every group's). What ``auto``
needs to switch between them. Both policies compute the same iterations for the same seed, so
a switched run's rows equal an unswitched one's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from test_groups_policies import small
from test_marl_run import rlgen, rows

pytest.importorskip("mpe2.simple_tag_v3")

TIMING = ("time", "steps_per_s")


def _build(spec: Path, policy: str, workers: int, out: Path) -> Path:
    r = rlgen("build", spec, "--policy", policy, "--workers", workers, "-o", out, cwd=spec.parent)
    assert r.returncode == 0, r.stderr
    return out


def _run(target: Path, run_dir: Path, iterations: int, resume: bool = False) -> None:
    args = [target, *(["--resume", run_dir] if resume else ["--run-dir", run_dir]), "--iterations", iterations]
    r = rlgen("run", *args, "--quiet", cwd=run_dir.parent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


def _learning(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(TIMING) and "time_" not in k} for row in rows(run_dir)]


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("switch")
    spec = small(tmp)
    data = yaml.safe_load(spec.read_text())
    data["train"]["checkpoint"] = {"every": 200, "keep": 5}  # every iteration: 8 copies x 25 steps
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return {
        "single": _build(spec, "single", 1, tmp / "single"),
        "agent-groups": _build(spec, "agent-groups", 3, tmp / "agent-groups"),
    }


@pytest.fixture(scope="module")
def unswitched(builds, tmp_path_factory) -> list[dict]:
    """single for 2 iterations, then 2 more under single (`--iterations` counts from the resume)."""
    run_dir = tmp_path_factory.mktemp("single") / "run"
    _run(builds["single"], run_dir, 2)
    _run(builds["single"], run_dir, 2, resume=True)
    return _learning(run_dir)


@pytest.mark.parametrize(("first", "then"), [("single", "agent-groups"), ("agent-groups", "single")])
def test_a_run_goes_on_under_the_other_policy_as_if_unswitched(builds, unswitched, tmp_path, first, then):
    run_dir = tmp_path / "run"
    _run(builds[first], run_dir, 2)
    if first == "agent-groups":  # single reads the groups' checkpoints: rank 0's own hold no learner
        assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir()) == ["adversaries", "good"]
    _run(builds[then], run_dir, 2, resume=True)
    got = _learning(run_dir)
    assert [r["iteration"] for r in got] == [1, 2, 3, 4]
    assert got == unswitched


def test_single_refuses_groups_checkpoints_that_lack_a_group(builds, tmp_path):
    """A group's checkpoints gone: the module cannot be whole, so no checkpoint is usable."""
    run_dir = tmp_path / "run"
    _run(builds["agent-groups"], run_dir, 2)
    shutil.rmtree(run_dir / "checkpoints" / "good")
    r = rlgen("run", builds["single"], "--resume", run_dir, "--iterations", 2, "--quiet", cwd=tmp_path)
    assert r.returncode != 0
    assert "no intact checkpoint" in r.stderr and "lack" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_auto_weighs_agent_groups_for_a_spec_with_groups(tmp_path):
    """`--policy auto` on the two-group example: agent-groups is among the candidates it ranks
    (on this machine's 2 up to cores + 1 workers: 1 + 2 groups), and the run ends as one run."""
    spec = small(tmp_path)
    run_dir = tmp_path / "run"
    args = ["run", spec, "--policy", "auto", "--iterations", 40, "--calibration-budget", 120]
    r = rlgen(*args, "--run-dir", run_dir, "--build-dir", tmp_path / "build", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((run_dir / "run.json").read_text())
    candidates = {(c["policy"], c["workers"]) for c in doc["auto"]["candidates"]}
    assert ("agent-groups", 3) in candidates and ("actors-learner", 3) in candidates
    assert doc["status"] == "finished"
    assert [row["iteration"] for row in rows(run_dir)] == list(range(1, 41))
