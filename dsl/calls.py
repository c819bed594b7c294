"""Parsing loop calls: ``component.method(arg, ...) -> out, ...``."""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
#: Blanks inside a call: the same as the schema's call pattern (not Python's Unicode ``\s``).
_S = r"[ \t\r\n]*"
_CALL = re.compile(
    rf"""\A{_S}(?P<component>{_IDENT}){_S}\.{_S}(?P<method>{_IDENT}){_S}
    \((?P<args>[^()]*)\){_S}
    (?:->{_S}(?P<outs>.*?))?{_S}\Z""",
    re.X | re.S,
)
_WORD = re.compile(rf"{_S}({_IDENT}){_S}")


@dataclass(frozen=True)
class Name:
    """A name inside a call string and its 0-based offset in that string."""

    text: str
    offset: int


@dataclass(frozen=True)
class Call:
    """One call of the loop, with the offsets of its parts (for precise errors)."""

    component: str
    method: str
    args: tuple[Name, ...]
    outputs: tuple[Name, ...]
    text: str

    @property
    def target(self) -> str:
        return f"{self.component}.{self.method}"

    def __str__(self) -> str:
        outs = f" -> {', '.join(o.text for o in self.outputs)}" if self.outputs else ""
        return f"{self.target}({', '.join(a.text for a in self.args)}){outs}"


class CallSyntaxError(ValueError):
    def __init__(self, message: str, offset: int, hint: str = ""):
        super().__init__(message)
        self.message, self.offset, self.hint = message, offset, hint


def _names(text: str, base: int, what: str) -> tuple[Name, ...]:
    if not text.strip():
        return ()
    out = []
    pos = 0
    for part in text.split(","):
        m = _WORD.fullmatch(part)
        if not m and not part.strip():
            raise CallSyntaxError(
                f"missing {what} name (a stray comma?)", base + pos, "separate names with single commas"
            )
        if not m:
            bad = len(part) - len(part.lstrip())
            raise CallSyntaxError(
                f"{what} '{part.strip()}' is not a name",
                base + pos + bad,
                "names are letters, digits and underscores, separated by commas",
            )
        out.append(Name(m.group(1), base + pos + m.start(1)))
        pos += len(part) + 1
    return tuple(out)


def parse_call(text: str) -> Call:
    """Parse a call string; raise :class:`CallSyntaxError` with an offset into ``text``."""
    m = _CALL.match(text)
    if not m:
        hint = "write it as component.method(arg, ...) -> out, ..."
        if "(" not in text:
            raise CallSyntaxError("a call needs parentheses", len(text.rstrip()), hint)
        if "." not in text.split("(")[0]:
            raise CallSyntaxError("a call names a component and a method: component.method(...)", 0, hint)
        if text.count("(") != text.count(")"):
            raise CallSyntaxError("unbalanced parentheses", text.index("("), hint)
        arrow = text.find(")")
        raise CallSyntaxError("cannot read this call", arrow + 1 if arrow >= 0 else 0, hint)
    args = _names(m.group("args"), m.start("args"), "argument")
    outs_text = m.group("outs")
    if outs_text is not None and not outs_text.strip():
        raise CallSyntaxError("'->' must be followed by output names", m.end() - 1)
    outs = _names(outs_text, m.start("outs"), "output") if outs_text else ()
    return Call(m.group("component"), m.group("method"), args, outs, text)
