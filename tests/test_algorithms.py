"""The algorithm homes: one registry, settings typed once, the schema written from them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlgen.algorithms import ALGORITHMS
from rlgen.algorithms.base import spec_fields
from rlgen.algorithms.schema import LANGUAGE, SCHEMA, generate, text, with_learners
from rlgen.codegen.render import ALGORITHM_HOMES
from rlgen.dsl.catalog import COMPONENT_REFS, LEARNER_KINDS, METHODS
from rlgen.dsl.resolved import plain
from rlgen.dsl.spec import COMPONENT_DEFAULTS


def test_the_schema_file_is_what_the_homes_generate() -> None:
    current = SCHEMA.read_text(encoding="utf-8")
    assert text(generate(json.loads(current))) == current, "run: python -m rlgen.algorithms.schema"


def test_the_language_reference_lists_what_the_homes_say() -> None:
    current = LANGUAGE.read_text(encoding="utf-8")
    assert with_learners(current) == current, "run: python -m rlgen.algorithms.schema"
    for kind, algo in ALGORITHMS.items():
        assert f"#### `{kind}`" in current
        assert all(f"| `{f.name}` |" in current for f in spec_fields(algo.config))


def test_generating_the_schema_twice_changes_nothing() -> None:
    once = generate(json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert generate(once) == once


@pytest.mark.parametrize("kind", sorted(ALGORITHMS))
def test_every_setting_is_documented_and_constrained(kind: str) -> None:
    algo = ALGORITHMS[kind]
    assert spec_fields(algo.config), kind
    for f in spec_fields(algo.config):
        assert f.metadata["doc"].endswith("."), f"{kind}.{f.name}"
        assert f.metadata["schema"], f"{kind}.{f.name} has no schema constraints"


@pytest.mark.parametrize("kind", sorted(ALGORITHMS))
def test_the_language_knows_each_home_through_the_registry(kind: str) -> None:
    algo = ALGORITHMS[kind]
    assert kind in LEARNER_KINDS and METHODS[kind] == dict(algo.methods)
    assert set(COMPONENT_REFS[kind]) == {r.field for r in algo.refs}
    assert algo.acts in COMPONENT_REFS[kind]
    assert plain(COMPONENT_DEFAULTS[kind]) == json.loads(json.dumps(algo.defaults()))


@pytest.mark.parametrize("kind", sorted(ALGORITHMS))
def test_each_home_has_its_template_part(kind: str) -> None:
    source = (ALGORITHM_HOMES / ALGORITHMS[kind].template).read_text(encoding="utf-8")
    for macro in ("imports", "construct", "call"):
        assert f"{{% macro {macro}(" in source, f"{kind}: no {macro} macro"


def test_the_homes_import_without_tensorflow() -> None:
    code = (
        "import sys, rlgen.algorithms, rlgen.algorithms.schema\n"
        "from rlgen.algorithms import ALGORITHMS\n"
        "for kind in ALGORITHMS: __import__(f'rlgen.algorithms.{kind}.config')\n"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_wheel_ships_every_package_and_home(tmp_path) -> None:
    """A real wheel, built from a copy of the sources as `pip install .` builds it, holds every
    sub-package (each algorithm home among them) with its templates and the schema."""
    import shutil
    import zipfile

    root = SCHEMA.parent.parent
    source = tmp_path / "src"
    skip = shutil.ignore_patterns(".*", "__pycache__", "build", "runs", "tests", "benchmarks", "*.egg-info")
    shutil.copytree(root, source, ignore=skip)
    packages = [p.parent.relative_to(source).as_posix() for p in source.rglob("__init__.py") if p.parent != source]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("rlgen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert len(packages) > len(ALGORITHMS)
    for package in packages:
        assert f"rlgen/{package}/__init__.py" in names, f"the wheel lacks {package}"
    for kind in ALGORITHMS:
        assert {f"rlgen/algorithms/{kind}/{f}" for f in ("__init__.py", "learner.py", "fragment.j2")} <= names
    assert "rlgen/templates/main.py.j2" in names and "rlgen/schemas/rlgen.schema.json" in names
    assert not any(n.startswith(("rlgen/tests/", "rlgen/benchmarks/")) for n in names)
