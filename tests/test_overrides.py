"""``--seed`` and ``--set PATH=VALUE``: any value of a spec, for one command, checked as the file is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.api import validate_file
from rlgen.dsl.overrides import OverrideError, parse_setting, seed_setting

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "ppo-cartpole.rl.yaml"


def test_a_setting_is_a_path_and_a_yaml_value() -> None:
    s = parse_setting("networks.pi.hidden=[128, 128]")
    assert s.path == ("networks", "pi", "hidden") and s.value == [128, 128]
    assert parse_setting("networks.pi.hidden.0=32").path == ("networks", "pi", "hidden", 0)
    assert parse_setting("components.learner.lr=3e-4").value == pytest.approx(3e-4)
    assert parse_setting("env.id=CartPole-v1").value == "CartPole-v1"
    assert parse_setting("train.seed=7").flag == "--set train.seed=7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("lr", "is not PATH=VALUE"), ("=1", "is not PATH=VALUE"), ("a..b=1", "has an empty part"), ("a=.nan", "finite")],
)
def test_a_malformed_setting_says_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(OverrideError, match=expected):
        parse_setting(text)


def test_settings_change_the_spec_and_later_ones_win() -> None:
    sets = [seed_setting(7), parse_setting("components.learner.lr=1e-3"), parse_setting("components.learner.lr=5e-4")]
    result = validate_file(EXAMPLE, settings=sets)
    assert result.ok, result.diagnostics
    assert result.spec.train.seed == 7
    assert result.spec.components["learner"].get("lr") == pytest.approx(5e-4)
    assert result.settings == ("--seed 7", "--set components.learner.lr=1e-3", "--set components.learner.lr=5e-4")
    assert result.sha256 != validate_file(EXAMPLE).sha256  # the build's header hash covers them


def test_an_override_is_checked_like_the_file_and_the_error_points_at_it() -> None:
    result = validate_file(EXAMPLE, settings=[parse_setting("components.learner.lr=-1")])
    [d] = result.diagnostics
    assert d.code == "E208" and d.line == 0  # not a line of the file: the file does not hold -1
    assert d.message.endswith("(given by --set components.learner.lr=-1)")
    [d] = validate_file(EXAMPLE, settings=[parse_setting("components.learner.lrr=1")]).diagnostics
    assert d.code == "E202" and "did you mean 'lr'" in d.message and "given by --set" in d.message
    [d] = validate_file(EXAMPLE, settings=[seed_setting(-1)]).diagnostics
    assert d.message.endswith("(given by --seed -1)")


def test_a_path_the_document_does_not_have_is_e109() -> None:
    sets = [parse_setting("train.seed.x=1"), parse_setting("networks.pi.hidden.5=3")]
    diags = validate_file(EXAMPLE, settings=sets).diagnostics
    assert [d.code for d in diags] == ["E109", "E109"]
    assert "train.seed is a number, which has no 'x'" in diags[0].message
    assert "networks.pi.hidden is a list of 2 items, which has no '5'" in diags[1].message


def _rlgen(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlgen", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_build_records_the_overrides_and_run_trains_with_them(tmp_path: Path) -> None:
    r = _rlgen("build", str(EXAMPLE), "--seed", "7", "--set", "components.learner.lr=5e-4", "-o", "b", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    resolved = json.loads((tmp_path / "b" / "spec.resolved.json").read_text())
    assert resolved["overrides"] == ["--seed 7", "--set components.learner.lr=5e-4"]
    assert resolved["train"]["seed"] == 7 and resolved["components"]["learner"]["lr"] == pytest.approx(5e-4)
    assert "overrides" not in json.loads(_plain_build(tmp_path).read_text())

    r = _rlgen("run", str(EXAMPLE), "--seed", "3", "--iterations", "2", "--run-dir", "run", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"]["seed"] == 3
    again = _rlgen("run", "--resume", "run", "--seed", "4", cwd=tmp_path)
    assert again.returncode == 2 and "resumes with the spec it started with" in again.stderr
    bad = _rlgen("validate", str(EXAMPLE), "--set", "lr", cwd=tmp_path)
    assert bad.returncode == 2 and "is not PATH=VALUE" in bad.stderr and "Traceback" not in bad.stderr


def _plain_build(tmp_path: Path) -> Path:
    r = _rlgen("build", str(EXAMPLE), "-o", "plain", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path / "plain" / "spec.resolved.json"
