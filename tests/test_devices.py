"""Placement on devices, verified on CPU logical devices: ``RLGEN_FAKE_GPU=1`` splits the CPU
in two and makes a GPU request mean the second (``/device:CPU:1``), as a GPU would be used.

* every variable of a fragment placed on the stand-in lands there, its compiled steps run
  there (outputs, captured variables of the traced graph), and none is int32 (XLA keeps
  int32 variables on the host: the guard);
* a rank not placed sees no GPU and no stand-in;
* metrics are bit-identical to a CPU:0 run for the same seed under ``single`` (gymnasium and
  in-graph) and ``actors-learner``; ``run.json`` names each rank's device;
* a rank asked for a GPU that sees none fails at start in one line; ``--resume`` goes on
  under another placement;
* :func:`rlgen.runtime.devices.setup` on a GPU machine (a stand-in ``tf``): one GPU per rank
  by local rank, memory growth, GPUs hidden from ranks not placed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlgen.api import validate_file
from rlgen.runtime import devices

from conftest import ROOT

EXAMPLES = ROOT / "examples"
PROBE = ROOT / "tests" / "devices_probe.py"
STAND_IN = "/job:localhost/replica:0/task:0/device:CPU:1"


def _env(fake: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent), "RLGEN_EVAL_PROCESS": "0"}
    env.pop(devices.FAKE_ENV, None)
    return {**env, devices.FAKE_ENV: "1"} if fake else env


def _probe(tmp_path: Path, spec: str, request: str, *settings: str) -> dict:
    """Build ``spec`` placed by ``request`` ('none': no devices) and probe it in a fresh process."""
    from rlgen.codegen.build import build
    from rlgen.dsl.overrides import parse_setting

    result = validate_file(
        EXAMPLES / spec, devices=None if request == "none" else request, settings=[parse_setting(s) for s in settings]
    )
    assert result.ok, result.diagnostics
    build(result, tmp_path / "build")
    package = next((tmp_path / "build").glob("*/main.py")).parent.name
    out = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path / "build"), package, request],
        capture_output=True,
        text=True,
        env=_env(fake=True),
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("spec", "settings"),
    [("ppo-cartpole-ingraph.rl.yaml", ()), ("mappo-simple-spread.rl.yaml", ("env.backend=tensorflow",))],
    ids=["cartpole-in-graph", "mappo-in-graph"],
)
def test_a_fragment_on_the_stand_in_keeps_every_variable_and_step_there_and_no_int32(tmp_path, spec, settings):
    got = _probe(tmp_path, spec, "gpu", *settings)
    assert got["placed"]["device"] == "/device:CPU:1" and "RLGEN_FAKE_GPU=1" in got["placed"]["note"]
    assert got["logical_gpus"] == []  # the stand-in is a CPU device: nothing else pretends
    assert set(got["variables"].values()) == {STAND_IN}, got["variables"]
    assert got["captured"] == [STAND_IN]  # the traced graph reads them there
    assert set(got["step_devices"].values()) == {"/device:CPU:1"}
    assert all(devs == [STAND_IN] for devs in got["outputs"].values()), got["outputs"]
    # the int32 guard: XLA places int32 variables on the host, so a fused step on a GPU
    # could not run; every carried and env variable of a placed fragment is wider
    assert got["int32"] == [], got["int32"]


def test_a_rank_not_placed_sees_no_gpu_and_no_stand_in(tmp_path):
    got = _probe(tmp_path, "ppo-cartpole.rl.yaml", "none")
    assert got["placed"] == {"device": "/device:CPU:0", "requested": "cpu"}
    assert got["logical_gpus"] == [] and got["logical_cpus"] == ["/device:CPU:0"]
    assert set(got["variables"].values()) == {"/job:localhost/replica:0/task:0/device:CPU:0"}
    assert set(got["step_devices"].values()) == {None}  # CPU builds call steps as before


# --- devices.setup on a machine with GPUs (TensorFlow stood in for) ----------------------
class _FakeTF:
    def __init__(self, gpus: int) -> None:
        self.gpus = [SimpleNamespace(name=f"/physical_device:GPU:{i}") for i in range(gpus)]
        self.visible: list | None = None
        self.growth: list = []
        self.config = SimpleNamespace(
            list_physical_devices=lambda kind: list(self.gpus) if kind == "GPU" else [SimpleNamespace(name="CPU:0")],
            set_visible_devices=self._visible,
            experimental=SimpleNamespace(set_memory_growth=lambda d, on: self.growth.append((d.name, on))),
        )

    def _visible(self, devs: list, kind: str) -> None:
        assert kind == "GPU"
        self.visible = [d.name for d in devs]


@pytest.fixture(autouse=True)
def _forget_placement(monkeypatch):
    monkeypatch.delenv(devices.FAKE_ENV, raising=False)
    yield
    devices.reset()


def test_ranks_not_placed_hide_every_gpu_before_tensorflow_starts():
    for request in (None, "cpu"):
        tf = _FakeTF(2)
        placed = devices.setup(request, rank=1, local_rank=1, tf=tf)
        assert tf.visible == [] and placed.name == devices.CPU0 and not placed.refusal


def test_gpu_is_the_local_ranks_own_with_memory_growth_and_gpu_n_is_that_one():
    tf = _FakeTF(2)
    placed = devices.setup("gpu", rank=3, local_rank=3, tf=tf)
    assert tf.visible == ["/physical_device:GPU:1"] and tf.growth == [("/physical_device:GPU:1", True)]
    assert placed.name == "/device:GPU:0" and "/physical_device:GPU:1 of 2" in placed.note
    tf = _FakeTF(2)
    assert devices.setup("gpu:0", rank=3, local_rank=3, tf=tf).name == "/device:GPU:0"
    assert tf.visible == ["/physical_device:GPU:0"]


def test_auto_falls_back_to_the_cpu_and_an_explicit_gpu_is_refused_in_one_line(monkeypatch):
    from rlgen import machine

    monkeypatch.setattr(machine, "gpu_obstacles", lambda: ["no NVIDIA device"])
    assert devices.setup("auto", tf=_FakeTF(0)).name == devices.CPU0
    for request, sees in (("gpu", "no GPU"), ("gpu:2", "/physical_device:GPU:0, /physical_device:GPU:1")):
        placed = devices.setup(request, rank=2, tf=_FakeTF(0 if request == "gpu" else 2))
        with pytest.raises(devices.DeviceRefused) as refused:
            devices.check(placed)
        line = str(refused.value)
        assert "\n" not in line and line.startswith(f"rank 2 on {os.uname().nodename} was placed on {request}")
        assert f"TensorFlow sees {sees}" in line and "--devices learner=cpu" in line and "auto" in line


def test_the_evaluator_runs_on_the_cpu():
    devices.setup("gpu", tf=_FakeTF(1))
    assert devices.device_of("gpu") == "/device:GPU:0"
    devices.cpu_only()
    try:
        assert devices.device_of("gpu") == devices.CPU0 and os.environ["CUDA_VISIBLE_DEVICES"] == "-1"
    finally:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)


# --- whole runs ----------------------------------------------------------------------------
def _run(tmp: Path, spec: str, *args: str, fake: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
    cmd = [sys.executable, "-m", "rlgen", "run", str(EXAMPLES / spec), "--run-dir", str(tmp), "--quiet", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(fake), timeout=600)
    return out, tmp


def _rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if "time" not in k and not k.endswith("_per_s")} for r in rows]


@pytest.mark.parametrize(
    ("spec", "args", "placed"),
    [
        ("ppo-cartpole.rl.yaml", ("--devices", "gpu"), {"0": "/device:CPU:1"}),
        ("ppo-cartpole-ingraph.rl.yaml", ("--devices", "gpu"), {"0": "/device:CPU:1"}),
        (
            "ppo-cartpole.rl.yaml",
            ("--policy", "actors-learner", "--workers", "2", "--devices", "learner=gpu,actors=cpu"),
            {"0": "/device:CPU:1", "1": "/device:CPU:0"},
        ),
    ],
    ids=["single-gymnasium", "single-in-graph", "actors-learner"],
)
def test_metrics_on_the_stand_in_are_bit_identical_to_cpu0(tmp_path, spec, args, placed):
    common = ["--iterations", "4", "--set", "train.eval.every=0"]
    policy = list(args[: args.index("--devices")])
    cpu, cpu_dir = _run(tmp_path / "cpu", spec, *common, *policy)
    assert cpu.returncode == 0, cpu.stderr[-2000:]
    gpu, gpu_dir = _run(tmp_path / "gpu", spec, *common, *args, fake=True)
    assert gpu.returncode == 0, gpu.stderr[-2000:]
    assert len(_rows(gpu_dir)) == 4 and _rows(gpu_dir) == _rows(cpu_dir)
    used = json.loads((gpu_dir / "run.json").read_text())["devices"]
    assert {rank: d["device"] for rank, d in used.items()} == placed
    assert "RLGEN_FAKE_GPU=1" in used["0"]["note"]
    on_cpu = json.loads((cpu_dir / "run.json").read_text())["devices"]
    assert {d["device"] for d in on_cpu.values()} == {"/device:CPU:0"}


def test_a_rank_asked_for_a_gpu_it_cannot_see_fails_at_start_in_one_line(tmp_path):
    out, _ = _run(tmp_path / "r", "ppo-cartpole.rl.yaml", "--devices", "gpu", "--iterations", "1")
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if "DeviceRefused" in ln]
    assert len(lines) == 1, out.stderr[-2000:]
    assert f"rank 0 on {os.uname().nodename} was placed on gpu but TensorFlow sees no GPU" in lines[0]
    assert "--devices learner=cpu" in lines[0] and "--devices auto" in lines[0]


def test_resume_goes_on_under_another_placement(tmp_path):
    """``auto``: the stand-in while RLGEN_FAKE_GPU=1, CPU:0 when the run resumes without it.
    The checkpoint written from CPU:1 is restored on CPU:0, and the run goes on exactly as the
    same run started and resumed on CPU:0 does (a resume is not a straight run: rows after it
    differ from an uninterrupted run's, placed or not)."""
    spec = "ppo-cartpole-ingraph.rl.yaml"
    every = ["--set", "train.checkpoint.every=256", "--set", "train.eval.every=0"]

    def start_then_resume(name: str, fake: bool) -> Path:
        first, run = _run(tmp_path / name, spec, "--devices", "auto", "--iterations", "2", *every, fake=fake)
        assert first.returncode == 0, first.stderr[-2000:]
        assert json.loads((run / "run.json").read_text())["devices"]["0"]["device"] == (
            "/device:CPU:1" if fake else "/device:CPU:0"
        )
        cmd = [sys.executable, "-m", "rlgen", "run", "--resume", str(run), "--iterations", "2", "--quiet"]
        resumed = subprocess.run(cmd, capture_output=True, text=True, env=_env(False), timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert json.loads((run / "run.json").read_text())["devices"]["0"]["device"] == "/device:CPU:0"
        return run

    moved, stayed = start_then_resume("moved", fake=True), start_then_resume("stayed", fake=False)
    assert [r["iteration"] for r in _rows(moved)] == [1, 2, 3, 4]
    assert _rows(moved) == _rows(stayed)
