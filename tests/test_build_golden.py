"""Golden build trees: every example under every policy it supports, file by file.

Regenerate with ``pytest tests/test_build_golden.py --update-goldens`` and review the diff.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from buildcases import CASE_LIST, CASES, IDS, build_case, workers_for

from rlgen.api import validate_file, validate_text
from rlgen.codegen.build import BuildError, build
from rlgen.codegen.policies import POLICIES
from rlgen.codegen.render import RUFF_TOML, RUFF_VERSION, ruff_command
from rlgen.dsl.validate import validate_text as dsl_validate_text

from conftest import EXAMPLES, ROOT, check_golden

GOLDEN = ROOT / "tests" / "golden" / "builds"


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_build_matches_golden(example, policy, workers, update_goldens):
    files = build_case(example, policy, workers).files
    root = GOLDEN / example.name.removesuffix(".rl.yaml") / policy
    for rel, text in sorted(files.items()):
        check_golden(root / rel, text, update_goldens)
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert on_disk == set(files), "stale golden files"


def test_the_case_list_is_every_policy_each_example_supports():
    """A new example, or a policy an example gains or loses, must change CASE_LIST (and its goldens)."""
    supported = {
        (e.name.removesuffix(".rl.yaml"), p, w) for e in EXAMPLES for p in POLICIES if (w := workers_for(e, p))
    }
    assert set(CASE_LIST) == supported


def test_every_golden_directory_belongs_to_a_case():
    on_disk = {(d.parent.name, d.name) for d in GOLDEN.glob("*/*") if d.is_dir()}
    cases = {(name, policy) for name, policy, _ in CASE_LIST}
    assert on_disk == cases, f"orphaned: {sorted(on_disk - cases)}; missing: {sorted(cases - on_disk)}"
    assert not [p for p in GOLDEN.iterdir() if p.is_file()] and not [p for p in GOLDEN.glob("*/*") if p.is_file()]


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


def test_a_build_is_lint_clean_from_its_own_directory(tmp_path):
    """`cd BUILD && ruff check . && ruff format --check .` finds nothing: the build carries the
    ruff.toml it is formatted with."""
    ruff = ruff_command()
    for i, (example, policy, workers) in enumerate(CASES):
        out = tmp_path / str(i)
        build(validate_file(example, policy=policy, workers=workers), out)
        assert (out / "ruff.toml").read_text() == RUFF_TOML
        for args in (["check", "."], ["format", "--check", "."]):
            r = subprocess.run([*ruff, *args], cwd=out, capture_output=True, text=True)
            assert r.returncode == 0, f"{example.name} {policy}: ruff {' '.join(args)}\n{r.stdout}{r.stderr}"


def test_builds_are_formatted_by_the_pinned_ruff():
    pin = re.search(r"^\s*ruff==(\S+)$", (ROOT / "setup.cfg").read_text(), re.M)
    assert pin and pin.group(1) == RUFF_VERSION
    assert ruff_command()[0].endswith(("ruff", "ruff.exe"))


def test_a_missing_or_other_ruff_fails_the_build_clearly(monkeypatch):
    """Never write differently formatted files: say which ruff is needed instead."""
    monkeypatch.setattr("rlgen.codegen.render.RUFF_VERSION", "0.0.1")
    example, policy, workers = CASES[0]
    with pytest.raises(BuildError, match=r"with ruff 0\.0\.1, found .*pip install ruff==0\.0\.1"):
        build_case(example, policy, workers)


def test_build_output_does_not_depend_on_graphviz(monkeypatch):
    """No SVG in the build tree: whether Graphviz is installed changes nothing."""
    example, policy, workers = CASES[0]
    with_dot = build_case(example, policy, workers).files
    monkeypatch.setattr("shutil.which", lambda *_: None)
    assert build_case(example, policy, workers).files == with_dot
    assert not [f for f in with_dot if f.endswith(".svg")]


def test_generated_modules_compile(tmp_path):
    for example, policy, workers in CASES:
        for rel, text in build_case(example, policy, workers).files.items():
            if rel.endswith(".py"):
                compile(text, rel, "exec")


def test_build_never_imports_tensorflow_or_horovod():
    code = (
        "import sys; from rlgen.api import build_file;"
        f"build_file({str(ROOT / 'examples' / 'ppo-cartpole.rl.yaml')!r}, policy='multi-learner', workers=2);"
        "assert 'tensorflow' not in sys.modules and 'horovod' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
