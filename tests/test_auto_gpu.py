"""``--policy auto`` where a GPU is visible: GPU placements as candidates of unknown speed,
measured apart and never predicted or tried, remembered with their placement (rlgen.app.auto,
rlgen.app.costmodel, rlgen.app.history, rlgen.dsl.devices.auto_placements)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_auto import records

from rlgen import machine
from rlgen.api import validate_file
from rlgen.app.auto import Chooser
from rlgen.app.costmodel import Candidate, calibration_order, ranked
from rlgen.app.history import History, ran
from rlgen.dsl.devices import auto_placements, placement

from conftest import ROOT

PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"
HOROVOD = (Path(sys.executable).with_name("horovodrun")).exists()
GPU = "learner=gpu,actors=gpu"  # devices: auto, its GPU placement
CANDIDATES = [("actors-learner", 2), ("actors-learner", 3), ("central-inference", 3)]


def chooser(tmp_path: Path, measured: dict[str, float], total: int = 10**7, budget: float | None = None, **kw):
    """A chooser on a machine with a GPU (``devices``: the CPU placement, then the GPU's);
    ``measured``: what a measurement of each label would read; ``seen``: what was measured,
    in order, with the ``--devices`` its run would be given."""
    (tmp_path / "run.json").write_text("{}")
    seen: list[tuple[str, list[str]]] = []

    def measure(c: Candidate) -> None:
        seen.append((c.label, ch._devices_argv(c)))
        c.cost_s, c.measured = 12.0, measured.get(c.label)
        c.note = "measured" if c.measured else "failed"

    ch = Chooser(
        tmp_path / "s.rl.yaml",
        CANDIDATES,
        total,
        128,
        40,
        tmp_path,
        cores=2,
        note=lambda s: None,
        measure=measure,
        budget_s=budget,
        devices=kw.pop("devices", ("", GPU)),
        **kw,
    )
    ch.seen = seen
    return ch


def test_gpu_placements_only_where_a_gpu_serves_and_a_side_is_auto(monkeypatch):
    assert auto_placements("auto", gpu=False) == [""]  # a CPU machine: auto is the CPU, one placement
    assert auto_placements(None, gpu=True) == [""]  # no side on auto: the spec's placement only
    assert auto_placements({"learner": "gpu"}, gpu=True) == ["learner=gpu"]
    assert auto_placements("auto", gpu=True) == ["", GPU]
    assert auto_placements({"learner": "auto"}, gpu=True) == ["", "learner=gpu"]
    assert auto_placements({"learner": "gpu:1", "actors": "auto"}, gpu=True) == [
        "learner=gpu:1",
        "learner=gpu:1,actors=gpu",
    ]
    assert placement("auto", gpu=False) == "" and placement({"learner": "cpu", "actors": "cpu"}, gpu=True) == ""

    monkeypatch.delenv(machine.FAKE_GPU_ENV, raising=False)
    monkeypatch.setattr(machine, "nvidia_devices", lambda: [])
    assert not machine.gpu_visible()
    monkeypatch.setattr(machine, "nvidia_devices", lambda: ["/dev/nvidia0"])
    monkeypatch.setattr(machine, "gpu_obstacles", lambda: ["the installed TensorFlow is the CPU-only build"])
    assert not machine.gpu_visible()
    monkeypatch.setattr(machine, "gpu_obstacles", lambda: [])
    assert machine.gpu_visible()
    monkeypatch.setattr(machine, "nvidia_devices", lambda: [])
    monkeypatch.setenv(machine.FAKE_GPU_ENV, "1")  # the stand-in counts as a GPU
    assert machine.gpu_visible()


def test_a_cpu_machine_has_no_placed_candidates_and_its_record_is_as_before(tmp_path):
    c = chooser(tmp_path, {"actors-learner (3)": 2600.0}, total=10**6, devices=("",))
    assert [(x.policy, x.workers, x.devices) for x in c.candidates] == [(p, w, "") for p, w in CANDIDATES]
    c.decide(records(1000.0, env_share=0.1))
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert set(doc["choice"]) == {"policy", "workers"}
    assert all(
        set(row) == {"policy", "workers", "predicted", "measured", "ms", "cost_s", "note"} for row in doc["candidates"]
    )
    assert all(argv == [] for _, argv in c.seen)  # the spec's placement: no --devices given


def test_gpu_candidates_are_unknown_measured_apart_and_the_fastest_is_chosen_with_its_placement(tmp_path):
    speeds = {f"single (1) {GPU}": 1100.0, "actors-learner (3)": 1900.0, f"actors-learner (3) {GPU}": 5000.0}
    c = chooser(tmp_path, speeds)
    assert len(c.candidates) == 2 * len(CANDIDATES) + 1  # each twice, and single on the GPU
    # env-heavy: actors-learner (3) is predicted well past 1.15x single's speed, which on a CPU
    # machine is tried unmeasured; here GPU placements wait to be measured, so nothing is tried
    assert c.decide(records(1000.0)) is True and not c.trial
    gpu = [x for x in c.candidates if x.devices]
    assert all(x.predicted is None for x in gpu) and all(x.predicted for x in c.candidates if not x.devices)
    assert ranked(c.candidates)[0].predicted >= 1.15 * 1000.0
    # single on the GPU first, then down the CPU ranking, each GPU twin after its CPU candidate;
    # once one measures at 5,000 steps/s, CPU candidates predicted slower are not measured
    assert [label for label, _ in c.seen][:3] == [
        f"single (1) {GPU}",
        "actors-learner (3)",
        f"actors-learner (3) {GPU}",
    ]
    assert dict(c.seen)["actors-learner (3)"] == ["--devices", "learner=cpu,actors=cpu"]  # every run placed
    assert dict(c.seen)[f"single (1) {GPU}"] == ["--devices", GPU]
    assert (c.choice.policy, c.choice.workers, c.choice.devices) == ("actors-learner", 3, GPU)
    assert c.devices_of(c.choice) == {"learner": "gpu", "actors": "gpu"}  # what the run goes on with
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert doc["choice"] == {"policy": "actors-learner", "workers": 3, "devices": {"learner": "gpu", "actors": "gpu"}}
    assert doc["candidates"][0]["devices"] == {"learner": "cpu", "actors": "cpu"}  # the profile's
    placed = [row for row in doc["candidates"] if row["devices"]["learner"] == "gpu"]
    assert len(placed) == len(gpu) and all(row["predicted"] is None for row in placed)
    assert doc["expected_run_s"] > 0 and doc["calibration_budget_s"] > 0  # from the CPU predictions only
    notes: list[str] = []
    c.note = notes.append
    c.publish()
    row = next(line for line in notes if line.startswith(f"actors-learner (3) {GPU}"))
    assert " unknown " in row and "<- chosen" in row


def test_gpu_candidates_are_measured_after_their_cpu_twins_and_none_is_chosen_unmeasured(tmp_path):
    c = chooser(tmp_path, {}, budget=0.0)  # no time to measure: nothing unknown is chosen
    assert c.decide(records(1000.0)) is False and c.choice.policy == "single" and not c.choice.devices
    assert c.seen == [] and all(x.measured is None for x in c.candidates)
    order = calibration_order(c.candidates)
    assert (order[0].policy, order[0].devices) == ("single", GPU)
    for i, x in enumerate(order[1:], 1):  # each GPU placement right after its CPU twin
        if x.devices:
            assert (order[i - 1].policy, order[i - 1].workers, order[i - 1].devices) == (x.policy, x.workers, "")
    assert [x for x in order if not x.devices] == [x for x in ranked(c.candidates) if not x.devices]


def test_history_keeps_placements_and_recall_chooses_a_gpu_placement_measured_before(tmp_path):
    h = History("k", tmp_path)
    h.path.parent.mkdir(parents=True)  # a file written before placements were kept: read as the CPU
    old = {"at": time.time(), "steps_per_s": 2000.0, "steps_per_iteration": 1024, "parts": {"update": 0.1, "env": 0.4}}
    h.path.write_text(json.dumps({"spec": "s", "measured": {"single:1": [old] * 3}}))
    assert h.measured()[("single", 1)].steps_per_s == 2000.0
    rows = records(4000.0, n=6)
    assert h.add("single", 1, rows, devices=GPU) and h.add("actors-learner", 2, records(2500.0, n=6))
    known = h.measured()
    assert ran("single", 1, GPU) == ("single", 1, GPU) and ran("single", 1) == ("single", 1)
    assert known[("single", 1, GPU)].steps_per_s == pytest.approx(4000.0) and known[("single", 1)].runs == 3
    assert "single:1@learner=gpu,actors=gpu" in json.loads(h.path.read_text())["measured"]

    c = chooser(tmp_path, {}, budget=0.0)  # nothing measured again
    c.model = validate_file(PPO).spec  # what Chooser.shape reads
    assert c.recall(h)
    assert (c.choice.policy, c.choice.workers, c.choice.devices) == ("single", 1, GPU) and c.seen == []
    assert c.choice.note.startswith("measured before") and c.record["choice"]["devices"]["learner"] == "gpu"


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_auto_run_with_a_stand_in_gpu_measures_the_gpu_placement_and_remembers_it(tmp_path):
    env = {**os.environ, machine.FAKE_GPU_ENV: "1", "RLGEN_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "rlgen", "run", str(PPO), "--policy", "auto", "--devices", "learner=auto"]
    args += ["--set", "train.eval.every=0", "--set", "train.total_steps=10000000", "--workers", "2"]

    def run(name: str, *more: str) -> dict:
        r = subprocess.run(
            [*args, "--run-dir", str(tmp_path / name), *more], capture_output=True, text=True, timeout=300, env=env
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads((tmp_path / name / "run.json").read_text())

    # a budget for one measurement: single on the stand-in, first in the calibration order
    # long enough to outlast auto's 2 s profile on a quiet machine (150 iterations did not)
    doc = run("run", "--calibration-budget", "12", "--iterations", "400")
    auto = doc["auto"]
    placed = [x for x in auto["candidates"] if x["devices"]["learner"] == "gpu"]
    assert placed and all(x["predicted"] is None for x in placed)
    assert all(x["predicted"] is not None for x in auto["candidates"] if x["devices"]["learner"] == "cpu")
    gpu_single = next(x for x in placed if x["policy"] == "single")
    assert gpu_single["measured"] is not None and "trial" not in auto
    choice = auto["choice"]
    measured = [x for x in auto["candidates"] if x["measured"] is not None]
    chosen = next(x for x in measured if (x["policy"], x["workers"], x["devices"]) == tuple(choice.values()))
    assert chosen["measured"] == max(x["measured"] for x in measured) or choice["policy"] == "single"
    device = doc["devices"]["0"]
    assert (doc["policy"], device["requested"]) == (choice["policy"], choice["devices"]["learner"])
    assert device["device"] == ("/device:CPU:1" if choice["devices"]["learner"] == "gpu" else "/device:CPU:0")
    assert doc["status"] == "finished"

    # remembered with its placement; made the fastest, the next run starts straight on the stand-in
    (path,) = (tmp_path / "cache" / "auto").glob("*.json")
    history = json.loads(path.read_text())
    assert "single:1" in history["measured"] and "single:1@learner=gpu" in history["measured"]
    for entry in history["measured"]["single:1@learner=gpu"]:
        entry["steps_per_s"] *= 100
    path.write_text(json.dumps(history))
    doc = run("again", "--iterations", "6")
    assert doc["auto"]["choice"] == {"policy": "single", "workers": 1, "devices": {"learner": "gpu", "actors": "cpu"}}
    assert "from_history" in doc["auto"]["profile"] and doc["devices"]["0"]["device"] == "/device:CPU:1"
    assert re.search(r"single-1$", doc["build_dir"]) and doc["status"] == "finished"
