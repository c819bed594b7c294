"""Generated code uses only the spec's names and those listed in rlgen.codegen.names.GENERATED_NAMES.

Every golden build is parsed with ``ast``: a template change that introduces a new name
(a local, an import, a method) fails here until the name is added to that list, and so
refused by ``rlgen validate`` as a spec name.
"""

from __future__ import annotations

import pytest
import yaml
from buildcases import CASES, IDS, build_case
from generated_names import collisions, renamed, shadowed, unexplained

from rlgen.api import validate_file, validate_text
from rlgen.codegen.build import render_build
from rlgen.codegen.names import ATTRIBUTE_NAMES, GENERATED_NAMES, LOCAL_NAMES, TEMPLATE_NAMES
from rlgen.dsl.validate import validate_text as dsl_validate_text
from rlgen.dsl.yamlload import load_yaml

from conftest import ROOT


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_generated_code_uses_only_spec_names_and_listed_ones(example, policy, workers):
    files = build_case(example, policy, workers).files
    spec = validate_file(example, policy=policy, workers=workers).spec
    assert unexplained(files, spec) == {}, "add these to rlgen/codegen/names.py (and docs/language.md)"
    assert shadowed(files) == {}


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_no_spec_name_merges_with_a_name_of_generated_code(example, policy, workers):
    """The build equals, token for token, the build of the spec with all its names renamed."""
    result = validate_file(example, policy=policy, workers=workers)
    alpha = renamed(load_yaml(example.read_text())[0], result.spec)
    again = validate_text(yaml.safe_dump(alpha, sort_keys=False), policy=policy, workers=workers)
    assert again.ok, [d.message for d in again.diagnostics]
    assert collisions(render_build(result, "x").files, render_build(again, "x").files) == []


def test_the_renaming_check_finds_a_value_named_like_a_generated_local(monkeypatch):
    """With the validate check switched off, a value named `clock` (the rank loop's timer) builds,
    and the renaming check sees it merge with the timer."""
    monkeypatch.setattr("rlgen.codegen.build.check_names", lambda spec, flow: iter(()))
    text = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text().replace("-> metrics", "-> clock")
    result = dsl_validate_text(text)
    assert result.ok
    alpha = renamed(load_yaml(text)[0], result.spec)
    problems = collisions(
        render_build(result, "x").files,
        render_build(dsl_validate_text(yaml.safe_dump(alpha, sort_keys=False)), "x").files,
    )
    assert any("'clock' stands for both" in p for p in problems), problems


def test_the_check_notices_a_new_template_name():
    example, policy, workers = CASES[0]
    files = dict(build_case(example, policy, workers).files)
    spec = validate_file(example, policy=policy, workers=workers).spec
    main = next(rel for rel in files if rel.endswith("/main.py"))
    files[main] = files[main].replace("    clock = session.clock\n", "    timer = session.clock\n    clock = timer\n")
    assert unexplained(files, spec) == {main: {"timer"}}
    assert shadowed({main: "import numpy as np\n\n\ndef f(np):\n    return np\n"}) == {main: {"np"}}


def test_every_name_generated_code_reserves_is_documented():
    doc = (ROOT / "docs" / "language.md").read_text()
    lowercase = sorted(n for n in GENERATED_NAMES if n.islower() and n.isidentifier() and not n.startswith("_"))
    missing = [n for n in lowercase if f"`{n}`" not in doc]
    assert not missing, f"docs/language.md does not list {missing}"


def test_the_lists_are_consistent():
    assert TEMPLATE_NAMES <= LOCAL_NAMES <= GENERATED_NAMES and ATTRIBUTE_NAMES <= GENERATED_NAMES
    assert {"agent", "learner", "actor", "worker", "env_worker", "run_main", "clock", "self"} <= LOCAL_NAMES
