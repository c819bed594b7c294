"""The one error type of rlgen: a :class:`Diagnostic` says what is wrong, where, and how to fix it."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    """One finding about a spec.

    ``path`` is the location in the document as keys and list indexes
    (``("components", "learner", "lr")``); ``line``/``column`` are 1-based and
    filled from the source map; ``column_offset`` points inside a scalar (a call
    string) and is added to the scalar's start column when reporting.
    """

    code: str
    severity: Severity
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    path: tuple[str | int, ...] = ()
    hint: str = ""
    length: int = 1

    @property
    def json_path(self) -> str:
        return json_path(self.path)

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": str(self.severity),
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.json_path,
            "message": self.message,
            "hint": self.hint,
        }


def json_path(path: Sequence[str | int]) -> str:
    """``("loop", "rollout", 0)`` → ``$.loop.rollout[0]``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A " did you mean 'x'?" suffix for the closest candidate, or ''."""
    options = sorted(set(candidates))
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in options}
        if word.lower() in lowered:
            match = [lowered[word.lower()]]
    return f" (did you mean '{match[0]}'?)" if match else ""


def article(word: str) -> str:
    """``article("action")`` → ``"an action"``."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def quote_list(items: Iterable[str]) -> str:
    return ", ".join(f"'{i}'" for i in sorted(items))


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
