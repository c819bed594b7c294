"""Safe YAML loading that remembers where every value came from.

PyYAML's composer gives us a node tree with start/end marks; we construct
plain Python data from it ourselves, so that

* scalars resolve as in the YAML 1.2 core schema, the YAML that editors and JSON
  Schema tools read: ``yes``/``on`` and ``1:30`` are strings, ``0o17`` is an
  integer, ``1e-3`` a float, dates are strings (PyYAML alone reads YAML 1.1);
* only plain data is accepted: any explicit tag other than the standard
  scalar/sequence/mapping ones (``!!python/object``, ``!custom``) is an error, and
  an explicit scalar tag must fit its value (``!!bool maybe`` is an error);
* numbers are finite (no ``.nan``/``.inf``) and integers have at most
  :data:`MAX_INT_DIGITS` digits;
* a key that appears twice in one mapping is an error, not a silent overwrite;
  merge keys (``<<: *base``) merge mappings, and anything else after ``<<`` is an error;
* size is bounded: the file (:data:`MAX_BYTES`), its nesting (:data:`MAX_DEPTH`),
  its number of values and what aliases expand to (:data:`MAX_NODES` values,
  :data:`MAX_CHARS` characters: the "billion laughs" defence);
* only regular files are read (:func:`read_spec`), never more than the size limit;
* every value's position is recorded in a :class:`SourceMap` keyed by its path.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from rlgen.dsl.diagnostics import Diagnostic, Severity

#: Largest spec file, in bytes.
MAX_BYTES = 1 << 20
#: Most values (scalars, lists, mappings) a document may hold, or expand to through aliases
#: (a spec has a few hundred; counting while composing stops a huge one early).
MAX_NODES = 20_000
#: Most characters of scalars (keys included) a document may expand to through aliases.
MAX_CHARS = MAX_BYTES
#: Deepest nesting of lists and mappings.
MAX_DEPTH = 50
#: Longest integer, in digits (Python refuses to read longer ones).
MAX_INT_DIGITS = 4000

Path_ = tuple[str | int, ...]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"
_ALLOWED_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL, _SEQ, _MAP}

# The YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_CORE_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")
_CORE_BOOL = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
_CORE_INT = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)\Z")
_CORE_FLOAT = re.compile(
    r"(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z"
)


class _Loader(yaml.SafeLoader):
    """SafeLoader with the YAML 1.2 core schema's implicit tags and a bounded nesting depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.composed = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        self.depth += 1
        self.composed += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _TooBig(self.peek_event().start_mark, f"lists and mappings nest more than {MAX_DEPTH} levels")
            if self.composed > MAX_NODES:
                raise _TooBig(self.peek_event().start_mark, f"the document holds more than {MAX_NODES:,} values")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(_NULL, _CORE_NULL, ["~", "n", "N", ""])
_Loader.add_implicit_resolver(_BOOL, _CORE_BOOL, list("tTfF"))
_Loader.add_implicit_resolver(_INT, _CORE_INT, list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT, _CORE_FLOAT, list("-+0123456789."))
_Loader.add_implicit_resolver(_MERGE, re.compile(r"<<\Z"), ["<"])


@dataclass(frozen=True)
class Span:
    """A 1-based line/column range in a source file."""

    line: int
    column: int
    end_line: int
    end_column: int
    quoted: bool = False


@dataclass
class SourceMap:
    """Positions of the values (and of mapping keys) of one document."""

    file: str
    text: str
    values: dict[Path_, Span] = field(default_factory=dict)
    keys: dict[Path_, Span] = field(default_factory=dict)

    def span(self, path: Path_, *, key: bool = False) -> Span | None:
        """Span of the value at ``path`` (or of its key), else of the nearest ancestor."""
        path = tuple(path)
        if key and path in self.keys:
            return self.keys[path]
        while True:
            if path in self.values:
                return self.values[path]
            if not path:
                return None
            path = path[:-1]


class YamlError(Exception):
    """Raised with the diagnostics of a document that cannot be loaded (and its text, if read)."""

    def __init__(self, diagnostics: list[Diagnostic], text: str = ""):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics
        self.text = text


def fail(code: str, message: str, file: str, line: int, column: int, hint: str = "") -> YamlError:
    return YamlError([Diagnostic(code, Severity.ERROR, message, file, line, column, (), hint)])


def _span(node: yaml.Node) -> Span:
    s, e = node.start_mark, node.end_mark
    quoted = isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')
    return Span(s.line + 1, s.column + 1, e.line + 1, e.column + 1, quoted)


class _TooBig(Exception):
    def __init__(self, mark: yaml.Mark, what: str):
        self.mark, self.what = mark, what


class _Builder:
    def __init__(self, file: str, text: str):
        self.smap = SourceMap(file, text)
        self.errors: list[Diagnostic] = []
        self.nodes = 0
        self.chars = 0

    def error(self, code: str, node: yaml.Node, path: Path_, message: str, hint: str = "") -> None:
        sp = _span(node)
        self.errors.append(Diagnostic(code, Severity.ERROR, message, self.smap.file, sp.line, sp.column, path, hint))

    def count(self, node: yaml.Node, path: Path_, chars: int = 0) -> None:
        self.nodes += 1
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise _TooBig(node.start_mark, f"the document expands to more than {MAX_NODES:,} values")
        if self.chars > MAX_CHARS:
            raise _TooBig(node.start_mark, f"the document expands to more than {MAX_CHARS:,} characters of text")
        if len(path) > MAX_DEPTH:
            raise _TooBig(node.start_mark, f"lists and mappings nest more than {MAX_DEPTH} levels")

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count(node, path, len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
        self.smap.values.setdefault(path, _span(node))
        if node.tag not in _ALLOWED_TAGS:
            self.error(
                "E103",
                node,
                path,
                f"tag {node.tag!r} is not allowed",
                "a spec is plain data: remove the tag (only strings, numbers, booleans, null, lists and mappings)",
            )
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, (*path, i)) for i, child in enumerate(node.value)]
        return self._scalar(node, path)

    def _scalar(self, node: yaml.ScalarNode, path: Path_) -> Any:
        try:
            return scalar_value(node.tag, node.value)
        except ValueError as exc:
            code = "E108" if "finite" in str(exc) else "E103"
            hint = (
                "write a finite number (JSON and TensorFlow settings have no NaN or infinity)"
                if code == "E108"
                else "no setting needs a number this long: write a smaller one"
                if "digits" in str(exc)
                else "write a plain value, or remove the tag"
            )
            self.error(code, node, path, str(exc), hint)
            return None

    def _pairs(self, node: yaml.MappingNode, path: Path_, seen: frozenset[int]) -> list[tuple[Any, Any, bool]]:
        """``(key node, value node, merged)`` of a mapping: pairs merged in with ``<<`` first
        (earlier sources win), then its own pairs."""
        merged: list[tuple[Any, Any, bool]] = []
        own: list[tuple[Any, Any, bool]] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE:
                own.append((key_node, value_node, False))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for src in sources:
                self.count(src, path)
                if not isinstance(src, yaml.MappingNode) or src.tag != _MAP:
                    self.error(
                        "E107",
                        src,
                        path,
                        "`<<` merges a mapping (or a list of mappings) into this one, but got "
                        + ("a list inside the list" if isinstance(src, yaml.SequenceNode) else "a single value"),
                        "write `<<: *anchor` where the anchor names a mapping, or remove the `<<` line",
                    )
                    continue
                if id(src) in seen:
                    raise _TooBig(src.start_mark, "a mapping merges itself (a recursive `<<` alias)")
                merged.extend((k, v, True) for k, v, _ in self._pairs(src, path, seen | {id(src)}))
        return merged + own

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, tuple[yaml.Node, bool]] = {}
        for key_node, value_node, merged in self._pairs(node, path, frozenset({id(node)})):
            if not isinstance(key_node, yaml.ScalarNode):
                self.error("E104", key_node, path, "mapping keys must be plain strings", "write `name: value`")
                continue
            if key_node.tag not in _ALLOWED_TAGS:
                self.build(key_node, path)  # reports the tag
                continue
            self.count(key_node, path, len(key_node.value))
            key = key_node.value  # keys are names: as written (`1:` is the key "1")
            if key in first:
                prev_node, prev_merged = first[key]
                if merged:
                    continue  # an earlier merge source (or the mapping itself) already set it
                if prev_merged:
                    out.pop(key)  # a key given explicitly overrides one merged in with `<<`
                else:
                    self.error(
                        "E102",
                        key_node,
                        (*path, key),
                        f"duplicate key '{key}' (first defined on line {prev_node.start_mark.line + 1})",
                        "a key may appear only once in a mapping: remove or rename one of them",
                    )
                    continue
            first[key] = (key_node, merged)
            if not merged:
                self.smap.keys[(*path, key)] = _span(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out


def scalar_value(tag: str, text: str) -> Any:
    """The value of a scalar with a standard tag, as the YAML 1.2 core schema reads it;
    :class:`ValueError` with a message for a value that does not fit its tag."""
    if tag == _STR:
        return text
    if tag == _NULL:
        if not _CORE_NULL.match(text):
            raise ValueError(f"{_shown(text)} is not null (write null or ~)")
        return None
    if tag == _BOOL:
        if not _CORE_BOOL.match(text):
            raise ValueError(f"{_shown(text)} is not a boolean (write true or false)")
        return text.lower() == "true"
    if tag == _INT:
        if not _CORE_INT.match(text):
            raise ValueError(f"{_shown(text)} is not an integer")
        return _integer(text)
    if tag == _FLOAT:
        if _CORE_INT.match(text):
            return float(_integer(text))
        if not _CORE_FLOAT.match(text):
            raise ValueError(f"{_shown(text)} is not a number")
        value = math.inf if "n" in text.lower() else float(text)  # .inf, .nan (Python: inf, nan)
        if not math.isfinite(value):  # also 1e999
            raise ValueError(f"{_shown(text)} is not a finite number")
        return value
    raise ValueError(f"tag {tag!r} is not allowed")


def _integer(text: str) -> int:
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits):,} digits is too long (at most {MAX_INT_DIGITS:,})")
    if digits.startswith(("0o", "0x")):
        return int(digits[2:], 8 if digits[1] == "o" else 16)
    return int(text)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def load_yaml(text: str, file: str = "<string>") -> tuple[Any, SourceMap]:
    """Load one YAML document; return ``(data, source_map)`` or raise :class:`YamlError`."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise too_large(file)
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a control character: the reader checks the whole text first
        line, col = _line_col(text, exc.position)
        raise fail(
            "E101",
            f"the file contains the control character U+{exc.character:04X}, which YAML does not allow",
            file,
            line,
            col,
            "remove it: a spec is text (tab, line breaks and printable characters only)",
        ) from None
    try:
        root = loader.get_single_node()
    except _TooBig as exc:
        raise fail(
            "E105", f"document too large: {exc.what}", file, exc.mark.line + 1, exc.mark.column + 1, _LESS
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = exc.problem or str(exc)
        if exc.context:
            message = f"{message} ({exc.context})"
        raise fail(
            "E101",
            f"YAML syntax error: {message}",
            file,
            line,
            col,
            "check indentation, colons and quotes around this point",
        ) from None
    except yaml.YAMLError as exc:
        raise fail("E101", f"YAML error: {exc}", file, 1, 1, "check the file is a YAML document") from None
    finally:
        loader.dispose()
    if root is None:
        raise fail(
            "E106", "the file is empty", file, 1, 1, "start from an example: rlgen ships examples/ppo-cartpole.rl.yaml"
        )
    builder = _Builder(file, text)
    try:
        data = builder.build(root, ())
    except _TooBig as exc:
        raise fail(
            "E105", f"document too large: {exc.what}", file, exc.mark.line + 1, exc.mark.column + 1, _LESS
        ) from None
    if builder.errors:
        raise YamlError(builder.errors)
    return data, builder.smap


_LESS = "a spec is a small document: remove deeply nested or repeatedly aliased values"


def too_large(file: str) -> YamlError:
    return fail(
        "E105",
        f"file is larger than {MAX_BYTES // 1024} KiB",
        file,
        1,
        1,
        "a spec is a small document; split out data files",
    )
