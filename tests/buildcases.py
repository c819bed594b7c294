"""Which (example, policy, workers) the build tests cover: every policy an example supports."""

from __future__ import annotations

from pathlib import Path

from rlgen.api import validate_file
from rlgen.codegen.build import BuildError, build
from rlgen.codegen.policies import POLICIES

from conftest import EXAMPLES


def workers_for(example: Path, policy: str) -> int | None:
    """The most workers (3, else 2; 1 for single) the example validates with under ``policy``."""
    for workers in (1,) if policy == "single" else (3, 2):
        if validate_file(example, policy=policy, workers=workers).ok:
            return workers
    return None


def cases() -> list[tuple[Path, str, int]]:
    out = []
    for example in EXAMPLES:
        for policy in POLICIES:
            workers = workers_for(example, policy)
            if workers is None:
                continue
            result = validate_file(example, policy=policy, workers=workers)
            try:
                build(result)
            except BuildError:
                continue  # not supported by the code generator (tested in test_build_golden)
            out.append((example, policy, workers))
    return out


CASES = cases()
IDS = [f"{e.name.removesuffix('.rl.yaml')}-{p}" for e, p, _ in CASES]


def build_case(example: Path, policy: str, workers: int):
    return build(validate_file(example, policy=policy, workers=workers))
