"""``build()``: spec file → validated Spec → graph → passes → rendered build directory.

A thin facade; each stage lives in its own module. Nothing here imports
TensorFlow or Horovod.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlgen import __version__
from rlgen.codegen import dot
from rlgen.codegen.context import Context, CutError, fragment_devices
from rlgen.codegen.graph import GraphError, build_graph
from rlgen.codegen.ir import FDG, to_data, to_json
from rlgen.codegen.lower import lower
from rlgen.codegen.names import check_names, package_name
from rlgen.codegen.passes import run_passes
from rlgen.codegen.plan import Meta, Plan
from rlgen.codegen.policies import POLICIES
from rlgen.codegen.render import RUFF_TOML, FormatterMissing, RenderError, format_tree, ident, render
from rlgen.codegen.supported import check_supported
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.resolved import resolved
from rlgen.dsl.validate import Result
from rlgen.machine import version  # light: no TensorFlow, no numpy

#: Marks a directory written by ``rlgen build``, so a rebuild may replace it (and nothing else);
#: it holds the build's key and the digest of each file written (see :func:`cached`).
MARKER = ".rlgen-build"
#: What a build is rendered by, besides the spec: a change in any of these files is a new build.
SOURCES = ("__init__.py", "algorithms", "codegen", "dsl", "templates", "schemas")


class BuildError(Exception):
    """The spec is valid but cannot be built as asked (message says why and what to do)."""


@dataclass
class Build:
    """The outcome: the FDG, and the files written (relative path → text)."""

    fdg: FDG
    files: dict[str, str]
    out_dir: Path | None = None


def fdg_of(result: Result) -> tuple[FDG, Context]:
    """Graph and passes for a validated result (its spec's deploy section says policy and workers)."""
    spec, flow = result.spec, result.flow
    assert spec is not None and flow is not None
    policy = POLICIES[spec.deploy.policy].for_groups(tuple(g for g, _ in spec.env.groups or ()))
    workers = spec.deploy.workers
    spaces, _ = resolve_spaces(spec.env)
    try:
        graph = build_graph(spec, flow, spaces, spec.env.num_envs // policy.env_workers(workers))
        ctx = Context(spec, spaces, policy, spec.deploy.hosts)
        return run_passes(FDG(graph, policy.name, workers), ctx), ctx
    except (GraphError, CutError) as exc:
        raise BuildError(str(exc)) from None


def render_build(result: Result, spec_file: str) -> Build:
    """Every file of the build directory, in memory (deterministic)."""
    problems = [f.message for check in (check_supported, check_names) for f in check(result.spec, result.flow)]
    if problems:  # validate reports these as diagnostics; a Result validated without them lands here
        raise BuildError("; ".join(problems))
    fdg, ctx = fdg_of(result)
    spec = ctx.spec
    meta = Meta(__version__, spec_file, result.sha256, spec.name, fdg.policy, fdg.workers)
    plan = lower(fdg, ctx, meta, ident(package_name(spec.name)))
    files = render_plan(plan)
    files["fdg.json"] = to_json(fdg)
    # the --set/--seed a command gave are recorded with it (deploy overrides show in `deploy`)
    settings = {"overrides": list(result.settings)} if result.settings else {}
    files["spec.resolved.json"] = json.dumps({**resolved(spec), **settings}, indent=2) + "\n"
    # a picture: `rlgen graph --format svg` (or Graphviz's dot)
    files["fdg.dot"] = dot.to_dot(fdg, to_data(meta), fragment_devices(fdg, ctx))
    return Build(fdg, files)


def render_plan(plan: Plan) -> dict[str, str]:
    """The generated package and ``plan.json`` of a plan: rendering needs nothing else."""
    files: dict[str, str] = {}
    package = plan.package
    for frag in plan.fragments:
        template = "compute_fragment.py.j2" if frag.kind == "compute" else "env_worker.py.j2"
        files[f"{package}/{ident(frag.name)}.py"] = render(template, meta=plan.meta, f=frag)
    files[f"{package}/main.py"] = render("main.py.j2", plan=plan)
    files[f"{package}/__init__.py"] = render("package_init.py.j2", meta=plan.meta)
    files["plan.json"] = to_json(plan, sort_keys=False)
    return files


def _safe_out_dir(out_dir: Path) -> Path:
    out = Path(os.path.abspath(out_dir))
    if out.exists() and not out.is_dir():
        raise BuildError(f"output path {out_dir} exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise BuildError(
            f"output directory {out_dir} is not empty and was not written by rlgen build; choose another -o or empty it"
        )
    return out


def write_tree(files: dict[str, str], out_dir: Path, key: str = "") -> None:
    """Write ``files`` into ``out_dir`` atomically (a sibling temp dir, then a rename), with the
    marker recording ``key`` and each file's digest."""
    out = _safe_out_dir(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for rel, text in sorted(files.items()):
            target = (tmp / rel).resolve()
            if not target.is_relative_to(tmp.resolve()) or ".." in Path(rel).parts:
                raise BuildError(f"refusing to write {rel!r} outside the build directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        digests = {rel: _digest(text.encode("utf-8")) for rel, text in sorted(files.items())}
        marker = {"rlgen": __version__, "key": key, "files": digests}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
        tmp.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def _sources_digest() -> str:
    """Of rlgen's own files that rendering depends on (so an edited template is a new build)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for top in SOURCES:
        paths = [root / top] if (root / top).is_file() else sorted((root / top).rglob("*"))
        for path in paths:
            if path.is_file() and path.suffix in (".py", ".j2", ".json"):
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_key(result: Result, spec_file: str) -> str:
    """What a build's files are a function of: the spec as resolved (overrides and deployment
    included) and its file name, rlgen's rendering sources, and the versions of what resolves the
    env's spaces and formats the code."""
    assert result.spec is not None
    versions = {name: version(name) for name in ("gymnasium", "ruff")}
    inputs = {
        "rlgen": __version__,
        "sources": _sources_digest(),
        "versions": versions,
        "spec_file": spec_file,
        "sha256": result.sha256,
        "settings": list(result.settings),
        "spec": resolved(result.spec),
    }
    return _digest(json.dumps(inputs, sort_keys=True, default=str).encode("utf-8"))


def cached(out_dir: Path, key: str) -> dict[str, str] | None:
    """The files of the build in ``out_dir`` when it was written with ``key`` and no file has
    changed since (a cache hit: nothing is rendered, formatted or rewritten); else None."""
    try:
        marker = json.loads((out_dir / MARKER).read_text(encoding="utf-8"))
        if not isinstance(marker, dict) or marker.get("key") != key:
            return None
        files = {rel: (out_dir / rel).read_text(encoding="utf-8") for rel in marker["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(_digest(text.encode("utf-8")) != marker["files"][rel] for rel, text in files.items()):
        return None
    return files


def formatted(files: dict[str, str]) -> dict[str, str]:
    """``files`` with the Python ones formatted by the pinned ruff, and the ``ruff.toml`` they
    are formatted with added (so the build checks clean from its own directory)."""
    with tempfile.TemporaryDirectory(prefix="rlgen-fmt-") as tmp:
        root = Path(tmp)
        py = {rel: text for rel, text in files.items() if rel.endswith(".py")}
        for rel, text in py.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        format_tree(root)
        out = {rel: (root / rel).read_text(encoding="utf-8") if rel in py else text for rel, text in files.items()}
    return {**out, "ruff.toml": RUFF_TOML}


def build(result: Result, out_dir: str | Path | None = None, spec_file: str | None = None) -> Build:
    """Render (and with ``out_dir``, write) the build of a validated spec. When ``out_dir``
    already holds this very build, untouched, it is reused as it is."""
    name = spec_file or Path(result.file).name
    key = build_key(result, name)
    files = cached(Path(out_dir), key) if out_dir is not None else None
    if files is not None:
        return Build(fdg_of(result)[0], files, Path(out_dir))
    try:
        out = render_build(result, name)
    except RenderError as exc:
        raise BuildError(f"the spec holds a value that cannot be rendered safely: {exc}") from None
    try:
        out.files = formatted(out.files)
    except FormatterMissing as exc:
        raise BuildError(str(exc)) from None
    if out_dir is not None:
        write_tree(out.files, Path(out_dir), key)
        out.out_dir = Path(out_dir)
    return out
