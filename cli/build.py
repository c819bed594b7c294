"""``rlgen build`` and ``rlgen graph``: argument parsing and reporting only.

Hooked into the main parser by ``register(sub, _deploy_args)`` in ``rlgen/cli.py``.
Exit codes as ``validate``: 0 ok, 1 invalid spec (diagnostics printed), 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlgen.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE


def validated(args: argparse.Namespace):
    """Validate ``args.spec`` with the deploy overrides; (result, exit code), diagnostics printed."""
    from rlgen.api import validate_file
    from rlgen.cli import deploy_overrides
    from rlgen.dsl.report import REPORTERS

    try:
        result = validate_file(args.spec, **deploy_overrides(args))
    except OSError as exc:
        print(f"rlgen {args.command}: error: cannot read {args.spec}: {exc.strerror or exc}", file=sys.stderr)
        return None, EXIT_USAGE
    if not result.ok:
        color = sys.stderr.isatty()
        print(REPORTERS["text"](result.diagnostics, {result.file: result.text}, color), file=sys.stderr)
        return None, EXIT_INVALID
    return result, EXIT_OK


def _is_auto(result, command: str) -> bool:
    """``policy: auto`` names no cut to build or draw: say so (True) instead."""
    from rlgen.codegen.policies import AUTO, POLICIES

    if result.spec.deploy.policy != AUTO:
        return False
    print(
        f"rlgen {command}: error: policy 'auto' is chosen when training (`rlgen run SPEC --policy auto`); "
        f"give a named policy here: --policy {', '.join(POLICIES)}",
        file=sys.stderr,
    )
    return True


def cmd_build(args: argparse.Namespace) -> int:
    from rlgen.codegen.build import BuildError, build

    result, code = validated(args)
    if result is None:
        return code
    if _is_auto(result, "build"):
        return EXIT_USAGE
    out = Path(args.output) if args.output else Path("build") / result.spec.name
    try:
        done = build(result, out)
    except BuildError as exc:
        print(f"rlgen build: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"rlgen build: error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    frags = ", ".join(f"{f.name} x{f.replicas}" for f in done.fdg.fragments)
    print(f"{out}: policy {done.fdg.policy}, {done.fdg.workers} worker(s); fragments {frags}")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from rlgen import __version__
    from rlgen.codegen import dot
    from rlgen.codegen.build import BuildError, fdg_of

    result, code = validated(args)
    if result is None:
        return code
    if _is_auto(result, "graph"):
        return EXIT_USAGE
    try:
        fdg, _ = fdg_of(result)
    except BuildError as exc:
        print(f"rlgen graph: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    meta = {"version": __version__, "spec_file": Path(args.spec).name, "sha256": result.sha256}
    data = dot.to_dot(fdg, meta).encode()
    if args.format != "dot":
        if args.format == "png" and not args.output and sys.stdout.isatty():
            print("rlgen graph: error: a PNG is no text for a terminal; give -o FILE.png", file=sys.stderr)
            return EXIT_USAGE
        image = dot.render_image(data.decode(), args.format)
        if image is None:
            print(f"rlgen graph: error: {dot.INSTALL_GRAPHVIZ}", file=sys.stderr)
            return EXIT_USAGE
        data = image
    if args.output:
        Path(args.output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
    return EXIT_OK


def register(sub, deploy_args) -> None:
    """Add ``build`` and ``graph`` to the ``rlgen`` sub-command parser."""
    p = sub.add_parser(
        "build",
        help="generate the per-fragment code of a spec",
        description="Validate a spec, cut its loop into fragments for a distribution "
        "policy and write one module per fragment, plan.json, fdg.json and a "
        "picture of the FDG. Never imports TensorFlow or Horovod.",
    )
    p.add_argument("spec", metavar="SPEC", help="the .rl.yaml spec")
    p.add_argument("-o", "--output", metavar="DIR", help="build directory (default build/<name>)")
    deploy_args(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser(
        "graph",
        help="print the fragmented dataflow graph (DOT) of a spec",
        description="Print the FDG with its placement as Graphviz DOT, or draw it as SVG or PNG (Graphviz's `dot`).",
    )
    p.add_argument("spec", metavar="SPEC", help="the .rl.yaml spec")
    p.add_argument("--format", choices=("dot", "svg", "png"), default="dot")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    deploy_args(p)
    p.set_defaults(func=cmd_graph)
