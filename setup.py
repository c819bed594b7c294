"""The packages a wheel of rlgen holds; everything else about the distribution is in setup.cfg.

The repository root is the package ``rlgen`` (``package_dir`` in setup.cfg), so setuptools'
own discovery would name its sub-packages ``dsl``, ``codegen``...; and a hand-kept list in
setup.cfg missed sub-packages (``rlgen.codegen.lower`` and three more were absent from every
wheel while the editable install hid it). Here every folder below the root that holds an
``__init__.py``, through a chain of such folders, is a package, so that a new sub-package or
algorithm home (``algorithms/<kind>/``) needs no entry anywhere.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent


def packages(root: Path = ROOT) -> list[str]:
    """``rlgen`` and its sub-packages: the folders reached from the root through folders that
    hold an ``__init__.py`` (so tests/, benchmarks/, .venv/ and build outputs stay out)."""
    found = ["rlgen"]
    pending = [root]
    while pending:
        folder = pending.pop()
        for sub in sorted(folder.iterdir(), reverse=True):
            if sub.is_dir() and sub.name.isidentifier() and (sub / "__init__.py").is_file():
                found.append(".".join(("rlgen", *sub.relative_to(root).parts)))
                pending.append(sub)
    return sorted(found)


if __name__ == "__main__":
    setup(packages=packages())
