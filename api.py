"""The library facade: what the CLI (and users' scripts) call."""

from __future__ import annotations

from pathlib import Path

from rlgen.codegen.deploy_checks import check_deploy
from rlgen.dsl import validate as _validate
from rlgen.dsl.validate import Result


def validate_file(path: str | Path, **overrides) -> Result:
    """Validate a spec file with the language's checks and the deploy-policy checks."""
    return _validate.validate_file(path, extra_checks=(check_deploy,), **overrides)


def validate_text(text: str, file: str = "<string>", **overrides) -> Result:
    """Validate spec text (same checks as :func:`validate_file`)."""
    return _validate.validate_text(text, file, extra_checks=(check_deploy,), **overrides)
