"""Which names generated code binds or reads, and which of them neither come from the spec nor are
listed in :data:`rlgen.codegen.names.GENERATED_NAMES` (used by the golden and the fuzz tests)."""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import re
import tokenize

from rlgen.codegen.lower.fragments import class_name
from rlgen.codegen.names import GENERATED_NAMES, _role_names, group_constants
from rlgen.dsl.calls import parse_call
from rlgen.dsl.catalog import COMPONENT_REFS, NETWORK_REFS
from rlgen.dsl.spec import Spec

_FRESH = re.compile(r"_\d+$")  # `t_2`, `buffer_rows_3`: views._fresh's way around a taken name


def spec_names(spec: Spec) -> set[str]:
    """Every name the spec defines or writes."""
    out = set(spec.networks) | set(spec.components) | set(spec.partitions)
    for block in spec.loop.all_blocks():
        out.add(block.name)
        for lc in block.calls:
            out |= {lc.call.component, lc.call.method} | {n.text for n in (*lc.call.args, *lc.call.outputs)}
        out |= {name for pair in block.carry for name in pair}
    for part in spec.partitions.values():
        out |= {*part.send, *part.receive, *part.reduce}
    if spec.env.grouped:  # agent-groups' roles: a fragment variable and class per group
        out |= {g for g, _ in spec.env.groups} | {class_name(g) for g, _ in spec.env.groups}
    return out | group_constants(spec)


def used_names(source: str) -> tuple[set[str], set[str]]:
    """(names bound or read, attributes of fragment objects) in one generated module: every
    ``Name``, parameter, function and class name and import, and every attribute taken of
    ``self`` or of a fragment variable (``agent.actor``)."""
    fragments = _role_names() | {"self"}
    names: set[str] = set()
    attributes: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in fragments:
            attributes.add(node.attr)
    return names, attributes


def _from_spec(name: str, ours: set[str]) -> bool:
    """A spec name, or one derived from spec names (``send_buffer_obs``, ``rollout_actor_act``,
    ``buffer_rows``, ``rollout_step_2``)."""
    if name in ours:  # a spec name may itself end like a fresh one (`t_2`)
        return True
    name = _FRESH.sub("", name)
    return name in ours or any(name.startswith(f"{s}_") or name.endswith(f"_{s}") for s in ours)


def unexplained(files: dict[str, str], spec: Spec) -> dict[str, set[str]]:
    """Per generated module, the names it uses that are neither the spec's nor generated ones."""
    ours = spec_names(spec)
    out = {}
    for rel, text in files.items():
        if not rel.endswith(".py"):
            continue
        names, attributes = used_names(text)
        bad = {n for n in names | attributes if n not in GENERATED_NAMES and not _from_spec(n, ours)}
        if bad:
            out[rel] = bad
    return out


def _bound(fn: ast.AST) -> set[str]:
    """Parameters and assigned names of a function (or lambda), not of functions inside it."""
    out = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    todo = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.Lambda | ast.ClassDef):
            if not isinstance(node, ast.Lambda):
                out.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _free_builtins(node: ast.AST, bound: set[str], out: set[str]) -> None:
    """Builtins read where no enclosing function binds the name."""
    if isinstance(node, ast.FunctionDef | ast.Lambda):
        bound = bound | _bound(node)
    free = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound
    if free and node.id in _BUILTINS:
        out.add(node.id)
    for child in ast.iter_child_nodes(node):
        _free_builtins(child, bound, out)


_BUILTINS = frozenset(dir(builtins))


def shadowed(files: dict[str, str]) -> dict[str, set[str]]:
    """Per generated module, the parameters and locals of its functions that share a name with
    something of the module (an import, a constant, a class) or a builtin the module uses."""
    out = {}
    for rel, text in files.items():
        if not rel.endswith(".py"):
            continue
        tree = ast.parse(text)
        module: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                module |= {a.asname or a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                module.add(node.name)
            elif isinstance(node, ast.Assign):
                module |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        _free_builtins(tree, set(), module)
        local: set[str] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.Lambda):
                local |= _bound(fn) - ({fn.name} if isinstance(fn, ast.FunctionDef) else set())
        clash = local & module
        if clash:
            out[rel] = clash
    return out


# --- alpha-renaming: a collision check that does not trust any list ---------------------------
def _references(kind: str) -> tuple[str, ...]:
    """The fields of a component of this kind that name a network or another component."""
    return ("network", *COMPONENT_REFS.get(kind, ()), *NETWORK_REFS.get(kind, ()))


def renamed(data: dict, spec: Spec) -> dict:
    """The spec's document with every name it defines renamed to ``qx<name>xq`` (a name no
    template can use): networks, components, blocks, values, partitions and their uses."""
    ours = (set(spec.networks) | set(spec.components) | set(spec.partitions) | spec_values(spec)) - {"env"}
    ours |= {b.name for b in spec.loop.blocks}

    def ren(name):
        if not (isinstance(name, str) and name in ours):
            return name
        # names stay within the language's 64 characters: a long one gets a digest of itself
        return f"qx{name}xq" if len(name) <= 60 else f"qx{hashlib.sha1(name.encode()).hexdigest()[:16]}xq"

    def call(text: str) -> str:
        c = parse_call(text)
        outs = f" -> {', '.join(ren(o.text) for o in c.outputs)}" if c.outputs else ""
        return f"{ren(c.component)}.{c.method}({', '.join(ren(a.text) for a in c.args)}){outs}"

    def block(raw):
        if isinstance(raw, list):
            return [call(t) for t in raw]
        raw = dict(raw)
        raw["do"] = [call(t) for t in raw["do"]]
        if "carry" in raw:
            raw["carry"] = {ren(k): ren(v) for k, v in raw["carry"].items()}
        return raw

    out = dict(data)
    out["networks"] = {ren(k): v for k, v in data.get("networks", {}).items()}
    out["components"] = {
        ren(k): {f: ren(v) if f in _references(c["kind"]) else v for f, v in c.items()}
        for k, c in data["components"].items()
    }
    out["loop"] = {ren(k): block(v) for k, v in data["loop"].items()}
    parts = {}
    for k, p in data.get("partitions", {}).items():
        p = dict(p)
        if "at" in p:
            comp, _, method = p["at"].partition(".")
            p["at"] = f"{ren(comp)}.{method}"
        if "after" in p:
            p["after"] = ren(p["after"])
        for f in ("send", "receive"):
            if f in p:
                p[f] = [ren(x) for x in p[f]]
        parts[ren(k)] = p
    out["partitions"] = parts
    return out


def spec_values(spec: Spec) -> set[str]:
    return {o.text for b in spec.loop.all_blocks() for lc in b.calls for o in lc.call.outputs}


def _names(source: str) -> list[tuple[int, str]]:
    """The module's tokens but comments and strings; names of other objects' attributes
    (``x.value``) and keyword arguments (``f(name=...)``) become plain tokens: they are not in the
    namespaces spec names share (locals, module names, the fragments' own attributes)."""
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.STRING)
    ]
    fragments = {"self"} | _role_names()
    out = []
    depth = 0
    for i, t in enumerate(tokens):
        kind, name = t.type, t.string
        depth += {tokenize.INDENT: 1, tokenize.DEDENT: -1}.get(kind, 0)
        if kind == tokenize.NAME and depth == 1 and i and tokens[i - 1].string == "def":
            name = "." + name  # a method (generated code has classes only at module level)
        after_dot = kind == tokenize.NAME and i >= 2 and tokens[i - 1].string == "."
        if after_dot and tokens[i - 2].string in fragments and (i < 3 or tokens[i - 3].string != "."):
            name = "." + name  # the fragments' attributes: a namespace of their own
        elif after_dot:
            kind = tokenize.OP  # another object's attribute
        keyword_arg = i + 1 < len(tokens) and tokens[i + 1].string == "=" and tokens[i - 1].string in "(,"
        if kind == tokenize.NAME and keyword_arg:
            kind = tokenize.OP
        out.append((kind, name))
    return out


def collisions(real: dict[str, str], alpha: dict[str, str]) -> list[str]:
    """Generated modules of a spec (``real``) against those of the same spec with its names
    renamed (``alpha``): the token streams must match one to one, names mapping both ways, or
    a spec name merged with a name of generated code."""
    problems = []
    strip = re.compile(r"qx([a-z0-9_]*?)xq")
    for rel, text in real.items():
        if not rel.endswith(".py"):
            continue
        other = next((t for r, t in alpha.items() if strip.sub(r"\1", r) == rel), None)
        a, b = _names(text), _names(other or "")
        if len(a) != len(b) or [t for t, _ in a] != [t for t, _ in b]:
            problems.append(f"{rel}: the code differs beyond its names")
            continue
        forward: dict[str, str] = {}
        back: dict[str, str] = {}
        for (kind, x), (_, y) in zip(a, b, strict=True):
            if kind != tokenize.NAME:
                continue
            if forward.setdefault(x, y) != y or back.setdefault(y, x) != x:
                problems.append(f"{rel}: '{x}' stands for both '{forward[x]}' and '{y}'")
    return problems
