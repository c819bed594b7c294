"""``rlgen build`` and ``rlgen graph``: argument parsing and printing (:mod:`rlgen.app.build`
does the work; neither imports TensorFlow or Horovod)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlgen.app.errors import UsageError

from .common import EXIT_OK, deploy_args, deployment


def cmd_build(args: argparse.Namespace) -> int:
    from rlgen.app.build import BuildRequest, build

    out = Path(args.output) if args.output else None
    done = build(BuildRequest(Path(args.spec), out, deployment(args)))
    frags = ", ".join(f"{f.name} x{f.replicas}" for f in done.fdg.fragments)
    print(f"{done.out_dir}: policy {done.fdg.policy}, {done.fdg.workers} worker(s); fragments {frags}")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from rlgen.app.build import GraphRequest, graph

    if args.format == "png" and not args.output and sys.stdout.isatty():
        raise UsageError("a PNG is no text for a terminal; give -o FILE.png")
    data = graph(GraphRequest(Path(args.spec), args.format, deployment(args)))
    if args.output:
        try:
            Path(args.output).write_bytes(data)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        sys.stdout.buffer.write(data)
    return EXIT_OK


def register(sub) -> None:  # noqa: ANN001 - argparse's sub-parsers
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
