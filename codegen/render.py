"""Rendering: a fixed Jinja environment and the two filters through which spec data reaches code.

* ``ident`` lets through only validated Python identifiers (refuses keywords and dunders);
* ``literal`` renders ``str``/``int``/``float``/``bool``/``None`` and lists, tuples and
  ``str``-keyed dicts of those as Python literals, and refuses anything else;
* ``comment`` makes text safe inside a ``#`` comment (no line breaks, escapes control characters).

Templates use ``StrictUndefined``: a missing variable is an error, never an empty string.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import jinja2

from rlgen.algorithms import ALGORITHMS

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
#: The algorithm homes: each holds its part of a compute fragment (``<kind>/fragment.j2``).
ALGORITHM_HOMES = TEMPLATES.parent / "algorithms"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The ruff that formats generated code: pinned (setup.cfg), so that every machine writes
#: byte-identical builds.
RUFF_VERSION = "0.17.6"
#: The settings generated code is formatted and checked with; every build directory holds
#: them as ``ruff.toml``, so ``ruff check`` / ``ruff format --check`` run there agree.
RUFF_TOML = """\
# Written by rlgen build: the ruff settings this generated code is formatted and checked with.
line-length = 100
target-version = "py311"

[lint]
select = ["E", "F", "W", "I", "B", "UP", "SIM"]
"""


class RenderError(ValueError):
    """A value that must not reach generated code."""


def ident(value: Any) -> str:
    """A validated identifier, or :class:`RenderError`."""
    if not isinstance(value, str) or not _IDENT.fullmatch(value) or keyword.iskeyword(value) or value.startswith("__"):
        raise RenderError(f"not a safe identifier: {value!r}")
    return value


def _string(s: str) -> str:
    text = repr(s)
    if text.startswith("'") and '"' not in s:
        return '"' + text[1:-1] + '"'
    return text


def literal(value: Any) -> str:
    """``value`` as Python source that evaluates to it (plain data only)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RenderError(f"non-finite number {value!r} cannot be a literal")
        return repr(float(value))
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        if not all(isinstance(k, str) or (isinstance(k, int) and not isinstance(k, bool)) for k in value):
            raise RenderError("only str and int keys are allowed in dict literals")
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise RenderError(f"{type(value).__name__} values cannot be rendered as literals")


def comment(value: Any) -> str:
    """Text for a ``#`` comment or docstring: printable, one line, no quotes or backslashes raw."""
    out = []
    for c in str(value):
        if c.isprintable() and c not in '\\"':
            out.append(c)
        else:
            out.append(repr(c)[1:-1] if c not in '\\"' else "\\" + c)
    return "".join(out)


def comment_lines(value: Any, indent: str = "", width: int = 100) -> str:
    """``# ``-comment lines of at most ``width`` characters holding ``value`` (made safe)."""
    import textwrap

    lines = textwrap.wrap(comment(value), width - len(indent) - 2, break_on_hyphens=False, subsequent_indent="  ") or [
        ""
    ]
    return ("\n" + indent).join("# " + line for line in lines)


def wrap_text(value: str, indent: str = "", width: int = 100) -> str:
    """Docstring text at ``indent``, wrapped at ``width`` (continuations 4 deeper) when it is
    longer; text that fits is left exactly as it is."""
    import textwrap

    if len(indent) + len(value) <= width:
        return value
    lines = textwrap.wrap(value, width - len(indent), break_on_hyphens=False, subsequent_indent="    ")
    return ("\n" + indent).join(lines)


def aslist(value: Any) -> Any:
    """A tuple as a list (how shapes and sizes are written in generated code); anything else as is."""
    return list(value) if isinstance(value, tuple) else value


def fields(value: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of each field of a dataclass, in order (e.g. keyword arguments to render);
    an optional field (``omit_none``) left at None is left out."""
    return [
        (f.name, getattr(value, f.name))
        for f in dataclasses.fields(value)
        if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)
    ]


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(TEMPLATES), str(ALGORITHM_HOMES)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,
    )
    env.globals["parts"] = {kind: algo.template for kind, algo in ALGORITHMS.items()}  # learner kind -> its part
    env.filters.update(
        ident=ident,
        literal=literal,
        comment=comment,
        comment_lines=comment_lines,
        wrap_text=wrap_text,
        aslist=aslist,
        fields=fields,
    )
    return env


_ENV: jinja2.Environment | None = None


def render(template: str, **context: Any) -> str:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV.get_template(template).render(**context)


class FormatterMissing(RuntimeError):
    """The pinned ruff is not installed: a build would differ from every other machine's."""


def ruff_command() -> list[str]:
    """The pinned ruff's executable (the ``ruff`` package's own binary), or :class:`FormatterMissing`."""
    from importlib import metadata

    fix = f"install it: pip install ruff=={RUFF_VERSION} (a dependency of rlgen)"
    try:
        version = metadata.version("ruff")
        from ruff import find_ruff_bin

        exe = find_ruff_bin()
    except (ImportError, metadata.PackageNotFoundError, FileNotFoundError):
        raise FormatterMissing(
            f"rlgen build formats generated code with ruff {RUFF_VERSION}, which is missing; {fix}"
        ) from None
    if version != RUFF_VERSION:
        raise FormatterMissing(f"rlgen build formats generated code with ruff {RUFF_VERSION}, found {version}; {fix}")
    return [str(exe)]


def format_tree(root: Path) -> None:
    """Fix and format the Python files under ``root`` with the pinned ruff and :data:`RUFF_TOML`
    (written there as ``ruff.toml``)."""
    ruff = ruff_command()
    config = root / "ruff.toml"
    config.write_text(RUFF_TOML, encoding="utf-8")
    common = ["--config", str(config), "--quiet"]
    subprocess.run([*ruff, "check", *common, "--fix", "--exit-zero", "."], cwd=root, check=True, capture_output=True)
    subprocess.run([*ruff, "format", *common, "."], cwd=root, check=True, capture_output=True)
