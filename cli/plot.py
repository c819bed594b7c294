"""``rlgen plot``: argument parsing and printing (:mod:`rlgen.app.plot` draws)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from rlgen.app.plot import draw

    print(draw([Path(p) for p in args.run_dirs], Path(args.output) if args.output else None))
    return EXIT_OK


def register(sub) -> None:  # noqa: ANN001 - argparse's sub-parsers
    p = sub.add_parser(
        "plot",
        help="draw learning curves of runs",
        description="Learning curves of one or more run directories: return against env steps and "
        "time (evaluations marked), and the losses; runs that differ only by seed as a mean with a band.",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("-o", "--output", metavar="FILE", help="a .png, .svg or .pdf (default RUN_DIR/curves.png)")
    p.set_defaults(func=cmd_plot)
