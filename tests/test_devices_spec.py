"""``deploy.devices`` in the language: sides, values, ``--devices``, and validate's machine
warning with the machine probes monkeypatched (validate never imports TensorFlow)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlgen import machine
from rlgen.api import validate_file
from rlgen.dsl.devices import by_side, merge, parse_flag
from rlgen.dsl.overrides import parse_setting
from rlgen.dsl.resolved import resolved

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "ppo-cartpole.rl.yaml"


@pytest.fixture
def gpu_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose probes all say a GPU could be served."""
    monkeypatch.setattr(machine, "gpu_obstacles", lambda: [])


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def test_a_string_places_every_side_and_a_mapping_leaves_the_rest_on_cpu() -> None:
    assert by_side(None) is None
    assert by_side("gpu") == {"learner": "gpu", "actors": "gpu"}
    assert by_side((("learner", "gpu:1"),)) == {"learner": "gpu:1", "actors": "cpu"}


def test_the_flag_is_a_device_or_side_pairs_and_merges_side_by_side() -> None:
    assert parse_flag("auto") == "auto"
    assert parse_flag("learner=gpu, actors=cpu") == {"learner": "gpu", "actors": "cpu"}
    with pytest.raises(ValueError, match="SIDE=DEVICE"):
        parse_flag("learner=gpu,actors")
    assert merge({"learner": "gpu", "actors": "gpu"}, {"actors": "cpu"}) == {"learner": "gpu", "actors": "cpu"}
    assert merge("gpu", {"learner": "cpu"}) == {"learner": "cpu", "actors": "gpu"}
    assert merge({"learner": "gpu"}, "cpu") == "cpu"


def test_devices_survive_a_policy_change_and_resolve(gpu_machine: None) -> None:
    for policy in ("single", "actors-learner", "central-inference", "multi-learner"):
        result = validate_file(EXAMPLE, policy=policy, devices={"learner": "gpu", "actors": "cpu"})
        assert result.ok and not codes(result), (policy, result.diagnostics)
        assert resolved(result.spec)["deploy"]["devices"] == {"learner": "gpu", "actors": "cpu"}
    plain = validate_file(EXAMPLE)
    assert "devices" not in resolved(plain.spec)["deploy"]  # unset: the resolved spec is as before


@pytest.mark.parametrize(
    ("devices", "code", "text"),
    [
        ({"learners": "gpu"}, "E611", "unknown side 'learners' (did you mean 'learner'?)"),
        ({"env": "cpu"}, "E611", "unknown side 'env'"),
        ({"learner": "cuda"}, "E609", "'cuda' is not a device for side 'learner'"),
        ("gpu:x", "E609", "'gpu:x' is not a device"),
        ("GPU", "E609", "is not a device"),
    ],
)
def test_unknown_sides_and_bad_values_are_refused_naming_the_flag(devices, code, text, gpu_machine: None) -> None:
    result = validate_file(EXAMPLE, devices=devices)
    assert not result.ok
    (d,) = [d for d in result.diagnostics if d.code == code]
    assert text in d.message and "(given by --devices)" in d.message and d.hint


def test_a_value_of_the_wrong_type_is_a_schema_error() -> None:
    bad = validate_file(EXAMPLE, settings=[parse_setting("deploy.devices=3")])
    assert not bad.ok and bad.diagnostics[0].code.startswith("E2")


@pytest.mark.parametrize(
    ("obstacles", "warned"),
    [
        (["the installed TensorFlow is the CPU-only build (tensorflow-cpu 2.21.0)"], True),
        (["this machine has no NVIDIA device (no /dev/nvidia0)"], True),
        ([], False),
    ],
)
def test_validate_warns_where_this_machine_cannot_serve_a_gpu(monkeypatch, obstacles, warned) -> None:
    monkeypatch.setattr(machine, "gpu_obstacles", lambda: obstacles)
    result = validate_file(EXAMPLE, devices="gpu")
    assert result.ok  # a warning: the ranks may run on other hosts
    assert codes(result) == (["W610"] if warned else [])
    if warned:
        assert obstacles[0] in result.diagnostics[0].message
    # cpu and auto never warn: auto falls back to the CPU
    for quiet in ("cpu", "auto", {"learner": "auto", "actors": "cpu"}):
        assert not codes(validate_file(EXAMPLE, devices=quiet))


def test_the_probes_read_the_distribution_the_device_nodes_and_cuda_visible_devices(monkeypatch) -> None:
    versions = {"tensorflow-cpu": "2.21.0", "tensorflow": ""}
    monkeypatch.setattr(machine, "version", lambda dist: versions.get(dist, ""))
    monkeypatch.setattr(machine, "nvidia_devices", lambda: ["/dev/nvidia0"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert machine.gpu_obstacles() == ["the installed TensorFlow is the CPU-only build (tensorflow-cpu 2.21.0)"]
    versions.update({"tensorflow": "2.21.0", "tensorflow-cpu": ""})
    assert machine.gpu_obstacles() == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert machine.gpu_obstacles() == ["CUDA_VISIBLE_DEVICES='' hides every GPU"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    monkeypatch.setattr(machine, "nvidia_devices", lambda: [])
    assert len(machine.gpu_obstacles()) == 2


def test_the_cli_takes_devices_and_never_imports_tensorflow() -> None:
    code = (
        "import sys; from rlgen.cli import main\n"
        "rc = main(['validate', sys.argv[1], '--devices', 'learner=cpu,actors=cpu'])\n"
        "assert 'tensorflow' not in sys.modules, 'validate imported TensorFlow'\n"
        "sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr + out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "rlgen", "validate", str(EXAMPLE), "--devices", "learner"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "E609" in bad.stdout + bad.stderr


def _build(tmp_path, policy: str, devices) -> dict[str, str]:
    from rlgen.codegen.build import formatted, render_build

    result = validate_file(EXAMPLE, policy=policy, devices=devices)
    assert result.ok, result.diagnostics
    return formatted(render_build(result, EXAMPLE.name).files)


@pytest.mark.parametrize(
    ("policy", "placed"),
    [
        ("single", {"agent": ("gpu", "learner")}),
        ("actors-learner", {"learner": ("gpu", "learner"), "actor": ("cpu", "actors")}),
        ("central-inference", {"learner": ("gpu", "learner")}),
        ("multi-learner", {"worker": ("gpu", "learner")}),
    ],
)
def test_the_plan_module_graph_and_dry_run_say_where_each_fragment_runs(tmp_path, policy, placed, gpu_machine):
    import json

    files = _build(tmp_path, policy, {"learner": "gpu", "actors": "cpu"})
    plan = json.loads(files["plan.json"])
    got = {f["name"]: (f["device"], f["device_side"]) for f in plan["fragments"] if "device" in f}
    assert got == placed  # host fragments name no device: they are always on the CPU
    for frag, (device, _) in placed.items():
        module = next(text for name, text in files.items() if name.endswith(f"/{frag}.py"))
        assert f'DEVICE = "{device}"' in module
        assert module.count("with tf.device(") == 1 and "self.placed_on = device_of(DEVICE)" in module
    main = next(text for name, text in files.items() if name.endswith("/main.py"))
    roles = {r["role"]: r["device"] for r in plan["roles"]}
    assert f"DEVICES = {json.dumps(roles)}" in main and "devices=DEVICES" in main
    assert ", on gpu)" in files["fdg.dot"]


def test_a_build_without_devices_names_none(tmp_path):
    files = _build(tmp_path, "actors-learner", None)
    assert '"device"' not in files["plan.json"] and "DEVICE" not in "".join(files.values())
    assert ", on " not in files["fdg.dot"]
