"""Reporters turn diagnostics into text for people, JSON for tools, or GitHub annotations."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from rlgen.dsl.diagnostics import Diagnostic, Severity


def shown(text: str) -> str:
    """``text`` as a terminal may show it: every control character (ESC included) escaped, as
    Python writes it (``\\x1b``), so that a file name or a value cannot drive the terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _excerpt(d: Diagnostic, sources: dict[str, str]) -> list[str]:
    text = sources.get(d.file)
    if text is None or d.line <= 0:
        return []
    lines = text.splitlines()
    if d.line > len(lines):
        return []
    # one character per character, so the caret stays under its column; control characters shown as '?'
    src = "".join(c if c.isprintable() else "?" for c in lines[d.line - 1].expandtabs(1))
    col = max(d.column - 1, 0)
    if len(src) > _WIDTH:  # a long line: the part around the column
        start = max(0, min(col - _WIDTH // 3, len(src) - _WIDTH))
        cut = src[start : start + _WIDTH]
        src = ("…" if start else "") + cut + ("…" if start + _WIDTH < len(src) else "")
        col = col - start + (1 if start else 0)
    gutter = f"{d.line:>4} | "
    caret = " " * (len(gutter) + col) + "^" + "~" * max(min(d.length, _WIDTH) - 1, 0)
    return [gutter + src, caret]


#: Longest source excerpt shown, in characters.
_WIDTH = 120


def format_text(diagnostics: Sequence[Diagnostic], sources: dict[str, str], color: bool = False) -> str:
    """Compiler-style text: ``file:line:col: error[E301]: message``, excerpt, caret, hint."""
    red, yellow, cyan, bold, reset = ("\033[31m", "\033[33m", "\033[36m", "\033[1m", "\033[0m") if color else ("",) * 5
    out: list[str] = []
    for d in diagnostics:
        sev_color = red if d.severity is Severity.ERROR else yellow
        where = f"{shown(d.file)}:{d.line}:{d.column}" if d.line else shown(d.file)
        out.append(f"{bold}{where}{reset}: {sev_color}{d.severity}[{d.code}]{reset}: {d.message}")
        out.extend("  " + line for line in _excerpt(d, sources))
        if d.path:
            out.append(f"  {cyan}at{reset} {d.json_path}")
        if d.hint:
            out.append(f"  {cyan}hint{reset}: {d.hint}")
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    if diagnostics:
        out.append(f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}")
    return "\n".join(out)


def format_json(diagnostics: Sequence[Diagnostic], sources: dict[str, str], color: bool = False) -> str:
    del sources, color
    return json.dumps({"diagnostics": [d.to_dict() for d in diagnostics]}, indent=2)


def _gh_escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def format_github(diagnostics: Sequence[Diagnostic], sources: dict[str, str], color: bool = False) -> str:
    """GitHub Actions workflow commands: ``::error file=…,line=…,col=…,title=…::message``."""
    del sources, color
    out = []
    for d in diagnostics:
        level = "error" if d.severity is Severity.ERROR else "warning"
        props = [f"file={_gh_escape(d.file, True)}"]
        if d.line:
            props += [f"line={d.line}", f"col={d.column}"]
        props.append(f"title={_gh_escape(f'rlgen {d.code}', True)}")
        message = d.message + (f" — {d.hint}" if d.hint else "")
        out.append(f"::{level} {','.join(props)}::{_gh_escape(message)}")
    return "\n".join(out)


REPORTERS: dict[str, Callable[[Sequence[Diagnostic], dict[str, str], bool], str]] = {
    "text": format_text,
    "json": format_json,
    "github": format_github,
}
