"""A :class:`Finding` is a diagnostic before it is placed in the file."""

from __future__ import annotations

from dataclasses import dataclass

from rlgen.dsl.diagnostics import Severity


@dataclass(frozen=True)
class Finding:
    """What is wrong and where in the document.

    ``offset`` points inside a string value (a call), ``key`` at the mapping key
    rather than at its value.
    """

    code: str
    message: str
    path: tuple[str | int, ...]
    hint: str = ""
    severity: Severity = Severity.ERROR
    offset: int | None = None
    length: int = 1
    key: bool = False


def error(code: str, path: tuple, message: str, hint: str = "", **kw) -> Finding:
    return Finding(code, message, tuple(path), hint, Severity.ERROR, **kw)


def warning(code: str, path: tuple, message: str, hint: str = "", **kw) -> Finding:
    return Finding(code, message, tuple(path), hint, Severity.WARNING, **kw)
