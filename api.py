"""The library facade: what the CLI (and users' scripts) call.

Every command validates through here, so deploy overrides (``policy``, ``workers``,
``hosts``) are applied one way everywhere: a policy given without ``workers`` gets that
policy's minimum, and the schema's bounds apply to the overrides as to the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlgen.codegen.deploy_checks import check_deploy
from rlgen.codegen.names import check_names
from rlgen.codegen.policies import policy_min_workers
from rlgen.codegen.supported import check_supported
from rlgen.dsl import validate as _validate
from rlgen.dsl.validate import Result

if TYPE_CHECKING:
    from rlgen.codegen.build import Build

#: The checks of rlgen.codegen that validate runs after the language's own: what build
#: needs (policy, workers, hosts; names generated code can hold; parts it generates).
CODEGEN_CHECKS = (check_deploy, check_names, check_supported)


def validate_file(path: str | Path, **overrides) -> Result:
    """Validate a spec file with the language's checks and the code generator's."""
    return _validate.validate_file(path, extra_checks=CODEGEN_CHECKS, min_workers=policy_min_workers, **overrides)


def validate_text(text: str, file: str = "<string>", **overrides) -> Result:
    """Validate spec text (same checks as :func:`validate_file`)."""
    return _validate.validate_text(text, file, extra_checks=CODEGEN_CHECKS, min_workers=policy_min_workers, **overrides)


def build_file(
    spec_path: str | Path,
    out_dir: str | Path | None = None,
    policy: str | None = None,
    workers: int | None = None,
    hosts: list[str] | None = None,
    devices: str | dict[str, str] | None = None,
) -> tuple[Result, Build | None]:
    """Validate ``spec_path`` (with deploy overrides) and build it; ``Build`` is None if invalid.

    With a policy other than the spec's and no ``workers``, the policy's minimum is used.
    """
    from rlgen.codegen.build import build

    result = validate_file(spec_path, policy=policy, workers=workers, hosts=hosts, devices=devices)
    if not result.ok:
        return result, None
    return result, build(result, out_dir)
