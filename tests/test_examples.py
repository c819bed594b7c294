"""The examples are valid, warning-free, and the README shows them as they are."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from rlgen.api import validate_file

from conftest import EXAMPLES, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_required_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {
        "ppo-cartpole.rl.yaml",
        "ppo-pendulum.rl.yaml",
        "a2c-cartpole.rl.yaml",
        "dqn-cartpole.rl.yaml",
        "custom-network.rl.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_valid_without_warnings(path):
    result = validate_file(path)
    assert result.diagnostics == [], [f"{d.line}:{d.column} {d.code} {d.message}" for d in result.diagnostics]
    assert result.spec is not None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_opens_with_the_schema_modeline(path):
    assert path.read_text().startswith("# yaml-language-server: $schema=../schemas/rlgen.schema.json")


def test_readme_example_is_the_example_file():
    m = re.search(r"<!-- example: (\S+) -->\n```yaml\n(.*?)```", README, re.S)
    assert m, "README lost its example block"
    assert m.group(2) == (ROOT / m.group(1)).read_text(encoding="utf-8")


def test_readme_console_transcript_is_true():
    """Every `$ rlgen ...` line in the README's console blocks prints what the README says."""
    blocks = re.findall(r"```console\n(.*?)```", README, re.S)
    assert blocks
    for block in blocks:
        for cmd, expected in re.findall(r"^\$ (rlgen .*)\n((?:(?!\$ ).*\n)*)", block, re.M):
            argv = shlex.split(cmd)[1:]
            r = subprocess.run(
                [sys.executable, "-m", "rlgen", *argv],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "NO_COLOR": "1"},
                timeout=120,
            )
            assert r.stdout == expected, f"`{cmd}` prints:\n{r.stdout}"


def test_readme_setup_commands_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/setup.sh test" in ci
    assert "bash scripts/setup.sh test" in README and "bash scripts/setup.sh main" in README


def test_pre_commit_hook_runs_validate():
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "entry: rlgen validate" in hooks and r"\.rl\.ya?ml$" in hooks
