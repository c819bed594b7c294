"""Safe YAML loading that remembers where every value came from.

PyYAML's composer gives us a node tree with start/end marks; we construct
plain Python data from it ourselves, so that

* only plain data is accepted: any explicit tag other than the standard
  scalar/sequence/mapping ones (``!!python/object``, ``!custom``) is an error;
* a key that appears twice in one mapping is an error, not a silent overwrite;
* aliases are expanded with a budget (the "billion laughs" defence);
* numbers such as ``1e-3`` are floats, as in YAML 1.2 (PyYAML reads them as
  strings);
* every value's position is recorded in a :class:`SourceMap` keyed by its path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlgen.dsl.diagnostics import Diagnostic, Severity

MAX_BYTES = 1 << 20
MAX_NODES = 100_000
MAX_DEPTH = 50

Path_ = tuple[str | int, ...]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_ALLOWED_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL, _SEQ, _MAP}


class _Loader(yaml.SafeLoader):
    """SafeLoader whose float resolver also accepts ``1e-3`` and ``1E+5``."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != _FLOAT] for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


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
    """Raised with the diagnostics of a document that cannot be loaded."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


def _fail(code: str, message: str, file: str, line: int, column: int, hint: str = "") -> YamlError:
    return YamlError([Diagnostic(code, Severity.ERROR, message, file, line, column, (), hint)])


def _span(node: yaml.Node) -> Span:
    s, e = node.start_mark, node.end_mark
    quoted = isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')
    return Span(s.line + 1, s.column + 1, e.line + 1, e.column + 1, quoted)


class _Builder:
    def __init__(self, file: str, text: str):
        self.smap = SourceMap(file, text)
        self.errors: list[Diagnostic] = []
        self.nodes = 0
        self.ctor = _Loader("")

    def error(self, code: str, node: yaml.Node, path: Path_, message: str, hint: str = "") -> None:
        sp = _span(node)
        self.errors.append(Diagnostic(code, Severity.ERROR, message, self.smap.file, sp.line, sp.column, path, hint))

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or len(path) > MAX_DEPTH:
            raise _TooManyNodes(node)
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
            return self.ctor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:  # e.g. an int tag on a non-number
            self.error("E103", node, path, f"cannot read this value: {exc}", "write a plain value")
            return None

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, yaml.Node] = {}
        own = {id(k) for k, _ in node.value}
        self.ctor.flatten_mapping(node)  # resolves `<<` merge keys; merged pairs come first
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.error("E104", key_node, path, "mapping keys must be plain strings", "write `name: value`")
                continue
            key = self._scalar(key_node, path)
            if not isinstance(key, str):
                key = str(key).lower() if isinstance(key, bool) else str(key)
            if key in first and not (id(key_node) in own and id(first[key]) in own):
                out.pop(key)  # a key given explicitly overrides one merged in with `<<`
            elif key in first:
                prev = first[key].start_mark.line + 1
                self.error(
                    "E102",
                    key_node,
                    (*path, key),
                    f"duplicate key '{key}' (first defined on line {prev})",
                    "a key may appear only once in a mapping: remove or rename one of them",
                )
                continue
            first[key] = key_node
            self.smap.keys[(*path, key)] = _span(key_node)
            out[key] = self.build(value_node, (*path, key))
        return out


class _TooManyNodes(Exception):
    def __init__(self, node: yaml.Node):
        self.node = node


def load_yaml(text: str, file: str = "<string>") -> tuple[Any, SourceMap]:
    """Load one YAML document; return ``(data, source_map)`` or raise :class:`YamlError`."""
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise _fail(
            "E105",
            f"file is larger than {MAX_BYTES // 1024} KiB",
            file,
            1,
            1,
            "a spec is a small document; split out data files",
        )
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = exc.problem or str(exc)
        if exc.context:
            message = f"{message} ({exc.context})"
        raise _fail(
            "E101",
            f"YAML syntax error: {message}",
            file,
            line,
            col,
            "check indentation, colons and quotes around this point",
        ) from None
    except yaml.YAMLError as exc:
        raise _fail("E101", f"YAML error: {exc}", file, 1, 1) from None
    finally:
        loader.dispose()
    if root is None:
        raise _fail(
            "E106", "the file is empty", file, 1, 1, "start from an example: rlgen ships examples/ppo-cartpole.rl.yaml"
        )
    builder = _Builder(file, text)
    try:
        data = builder.build(root, ())
    except _TooManyNodes as exc:
        sp = _span(exc.node)
        raise _fail(
            "E105",
            f"document expands to more than {MAX_NODES} values or {MAX_DEPTH} levels (recursive or nested aliases?)",
            file,
            sp.line,
            sp.column,
            "remove deeply nested aliases",
        ) from None
    if builder.errors:
        raise YamlError(builder.errors)
    return data, builder.smap


def load_file(path: str | Path) -> tuple[Any, SourceMap]:
    """Read and load a spec file; I/O problems raise :class:`OSError`."""
    p = Path(path)
    if p.stat().st_size > MAX_BYTES:
        raise _fail(
            "E105",
            f"file is larger than {MAX_BYTES // 1024} KiB",
            str(path),
            1,
            1,
            "a spec is a small document; split out data files",
        )
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(
            "E101", f"file is not UTF-8 text (byte {exc.start})", str(path), 1, 1, "save the spec as UTF-8"
        ) from None
    return load_yaml(text, str(path))
