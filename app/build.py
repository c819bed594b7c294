"""``rlgen build`` and ``rlgen graph``: a spec's generated code, and its fragmented dataflow graph
as a picture."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import Failed, UsageError
from .spec import Deployment, named_policy, validated


@dataclass(frozen=True)
class BuildRequest:
    spec: Path
    output: Path | None = None  # default build/<name>
    deployment: Deployment = Deployment()


def build(request: BuildRequest):  # noqa: ANN201 - rlgen.codegen.build.Build
    """Validate and write the build; returns it (its ``out_dir`` set)."""
    from rlgen.codegen.build import BuildError
    from rlgen.codegen.build import build as render

    result = validated(request.spec, request.deployment)
    named_policy(result, "build")
    out = request.output or Path("build") / result.spec.name
    try:
        return render(result, out)
    except BuildError as exc:
        raise Failed(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class GraphRequest:
    spec: Path
    format: str = "dot"  # dot, svg or png
    deployment: Deployment = Deployment()


def graph(request: GraphRequest) -> bytes:
    """The FDG with its placement as Graphviz DOT, or drawn as SVG or PNG by Graphviz's ``dot``."""
    from rlgen import __version__
    from rlgen.codegen import dot
    from rlgen.codegen.build import BuildError, fdg_of
    from rlgen.codegen.context import fragment_devices

    result = validated(request.spec, request.deployment)
    named_policy(result, "graph")
    try:
        fdg, ctx = fdg_of(result)
    except BuildError as exc:
        raise Failed(str(exc)) from None
    meta = {"version": __version__, "spec_file": Path(request.spec).name, "sha256": result.sha256}
    data = dot.to_dot(fdg, meta, fragment_devices(fdg, ctx)).encode()
    if request.format == "dot":
        return data
    image = dot.render_image(data.decode(), request.format)
    if image is None:
        raise UsageError(dot.INSTALL_GRAPHVIZ)
    return image
