"""The package's layers, read from the code with ``ast`` (imports inside functions count too).

    cli/ -> app/ -> api.py, launch/ -> codegen/, runtime/ -> dsl/ (+ algorithms' TF-free half) -> machine.py

An import may go down the picture, never up or sideways between ``codegen`` and ``runtime``
(a rank never needs the code generator, and generating code never needs TensorFlow). An
algorithm's ``learner.py``, and ``algorithms/offpolicy.py`` (what the off-policy learners
share), are the part of ``algorithms/`` that ranks import: they may import ``runtime``. No two
modules import each other, however far round. Generated code imports only ``rlgen.runtime``
and ``rlgen.algorithms``. Modules stay under 450 lines and classes under 300, but for the few
named in ``ALLOWED_LONG`` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_PACKAGE = {"tests", "benchmarks", "examples", "scripts", "build", "runs", "docs", ".venv", ".git"}
GOLDEN_BUILDS = ROOT / "tests" / "golden" / "builds"

#: layer -> the layers it may import (besides itself)
MAY_IMPORT = {
    "cli": {"app", "api", "launch", "codegen", "runtime", "dsl", "machine", "root"},
    "app": {"api", "launch", "codegen", "runtime", "dsl", "machine", "root"},
    "api": {"codegen", "dsl", "machine", "root"},
    "launch": {"runtime", "dsl", "machine", "root"},
    "codegen": {"dsl", "machine", "root"},
    "runtime": {"dsl", "machine", "root"},
    "learner": {"runtime", "dsl", "machine", "root"},  # algorithms/<kind>/learner.py
    "dsl": {"machine", "root"},  # dsl/ and the TF-free half of algorithms/
    "machine": set(),
    "root": set(),
}

#: modules allowed past the caps, and why
ALLOWED_LONG = {
    "rlgen.codegen.plan": "the lowered plan's frozen dataclasses, a field per thing templates render: data, not logic",
}
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 300


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in NOT_PACKAGE or rel == Path("setup.py") or any(p.startswith(".") for p in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["rlgen", *parts])] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The rlgen modules ``name`` imports anywhere in its file (a ``from pkg import mod`` names mod)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found |= {f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names}
    return {m for m in found if m == "rlgen" or m.startswith("rlgen.")} - {name}


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "cli" if parts[1:] == ["__main__"] else "root"
    top = parts[1]
    if top == "algorithms":  # a home's learner.py, and what learners share, run in ranks
        return "learner" if parts[-1] in ("learner", "offpolicy") else "dsl"
    if top in ("schemas", "templates"):
        return "root"
    return top


def test_every_module_has_a_layer():
    unknown = {m for m in MODULES if layer(m) not in MAY_IMPORT}
    assert not unknown, f"modules outside the layers {sorted(MAY_IMPORT)}: {sorted(unknown)}"


def test_imports_run_down_the_layers():
    wrong = sorted(
        f"{m} ({layer(m)}) imports {d} ({layer(d)})"
        for m, deps in IMPORTS.items()
        for d in deps
        if layer(d) != layer(m) and layer(d) not in MAY_IMPORT[layer(m)]
    )
    assert not wrong, "imports that run the wrong way:\n" + "\n".join(wrong)


def test_no_module_imports_itself_round_a_circle():
    circles, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = "open"
        for d in sorted(IMPORTS.get(m, ())):
            if d not in IMPORTS or d == "rlgen":
                continue
            if state.get(d) == "open":
                circles.append(" -> ".join([*stack[stack.index(d) :], d]))
            elif d not in state:
                visit(d, [*stack, d])
        state[m] = "done"

    for m in sorted(IMPORTS):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_generated_code_imports_only_the_runtime_and_the_algorithms():
    wrong = set()
    for path in GOLDEN_BUILDS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for n in names:
                if n.startswith("rlgen") and not n.startswith(("rlgen.runtime", "rlgen.algorithms")):
                    wrong.add(f"{path.relative_to(GOLDEN_BUILDS)}: {n}")
    assert not wrong, sorted(wrong)


def test_modules_and_classes_stay_small():
    long = []
    for name, path in MODULES.items():
        if name in ALLOWED_LONG:
            continue
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_MODULE_LINES:
            long.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(f"{name}.{node.name}: class of {node.end_lineno - node.lineno + 1} lines")
    assert not long, "over the caps (split, or allow with a reason in ALLOWED_LONG):\n" + "\n".join(long)


@pytest.mark.parametrize("module", sorted(ALLOWED_LONG))
def test_every_allowed_long_module_still_needs_it(module):
    path = MODULES[module]
    assert path.read_text(encoding="utf-8").count("\n") > MAX_MODULE_LINES, f"{module} is short now: drop it"
