"""Golden build trees: every example under every policy it supports, file by file.

Regenerate with ``pytest tests/test_build_golden.py --update-goldens`` and review the diff.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from buildcases import CASES, IDS, build_case

from rlgen.api import validate_file, validate_text
from rlgen.codegen.build import BuildError, build
from rlgen.codegen.render import RUFF_CHECK, RUFF_FORMAT, ruff_command
from rlgen.dsl.validate import validate_text as dsl_validate_text

from conftest import ROOT, check_golden

GOLDEN = ROOT / "tests" / "golden" / "builds"


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_build_matches_golden(example, policy, workers, update_goldens):
    files = build_case(example, policy, workers).files
    root = GOLDEN / example.name.removesuffix(".rl.yaml") / policy
    for rel, text in sorted(files.items()):
        if rel.endswith(".svg"):
            continue  # depends on the installed Graphviz
        check_golden(root / rel, text, update_goldens)
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert on_disk == {r for r in files if not r.endswith(".svg")}, "stale golden files"


def test_every_example_builds_under_some_policy():
    built = {e.name for e, _, _ in CASES}
    assert {"ppo-cartpole.rl.yaml", "ppo-pendulum.rl.yaml", "a2c-cartpole.rl.yaml", "custom-network.rl.yaml"} <= built


def test_build_is_deterministic():
    example, policy, workers = CASES[0]
    assert build_case(example, policy, workers).files == build_case(example, policy, workers).files


def test_unsupported_component_kinds_are_refused_by_validate_and_build():
    """A custom component kind is declared with its methods but has no code generator: validate
    refuses it (E340) exactly as build does, with the same message."""
    text = (ROOT / "tests" / "corpus" / "invalid" / "48-custom-component.rl.yaml").read_text()
    text = text.replace("learner.update(buffer) -> metrics", "learner.update(buffer, obs) -> metrics")
    result = validate_text(text)
    assert [(d.code, d.json_path) for d in result.diagnostics if d.severity == "error"] == [
        ("E340", "$.components.learner.kind")
    ]
    unchecked = dsl_validate_text(text)  # the language's checks alone
    assert unchecked.ok, [d.message for d in unchecked.diagnostics]
    with pytest.raises(BuildError, match="does not generate code for component kind 'custom'"):
        build(unchecked)


@pytest.mark.skipif(ruff_command() is None, reason="ruff not installed")
def test_generated_trees_are_ruff_clean(tmp_path):
    for i, (example, policy, workers) in enumerate(CASES):
        build(validate_file(example, policy=policy, workers=workers), tmp_path / str(i))
    ruff = ruff_command()
    fmt = subprocess.run([*ruff, *RUFF_FORMAT, "--check", str(tmp_path)], capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    chk = subprocess.run([*ruff, *RUFF_CHECK, str(tmp_path)], capture_output=True, text=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr


def test_generated_modules_compile(tmp_path):
    for example, policy, workers in CASES:
        for rel, text in build_case(example, policy, workers).files.items():
            if rel.endswith(".py"):
                compile(text, rel, "exec")


def test_build_never_imports_tensorflow_or_horovod():
    code = (
        "import sys; from rlgen.codegen.build import build_file;"
        f"build_file({str(ROOT / 'examples' / 'ppo-cartpole.rl.yaml')!r}, policy='multi-learner', workers=2);"
        "assert 'tensorflow' not in sys.modules and 'horovod' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
