"""What every rank does around its role's loop: arguments, Horovod, the lifeline, the session.

A generated ``main.py`` holds the build's data (``RUN``, which role each rank plays,
one ``run_<role>`` function per role) and hands them to :func:`main`::

    def main(argv=None):
        run_rank(RUN, ROLES, RUNNERS, argv, distributed=True)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

from .lifeline import Lifeline
from .progress import Progress, RemoteProgress
from .session import RunConfig, Session, configure_tensorflow, default_run_dir

Runner = Callable[[Session, int], None]


def _parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run-dir", help="run directory (default: <train.run_dir>/<name>-<time>)")
    parser.add_argument("--resume", action="store_true", help="continue from the run directory's last checkpoint")
    parser.add_argument("--iterations", type=int, help="stop after this many iterations")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--lifeline", help=argparse.SUPPRESS)  # host:port:token of the launcher (rlgen run)
    return parser


def run_rank(
    run: RunConfig,
    roles: Mapping[int, str],
    runners: Mapping[str, Runner],
    argv: Sequence[str] | None = None,
    distributed: bool = False,
    description: str = "",
) -> None:
    """Parse the rank's arguments, start Horovod (``distributed``), run this rank's role."""
    args = _parser(description or f"rank entry of {run.name}").parse_args(argv)
    configure_tensorflow()
    if distributed:
        from . import comm

        rank, size = comm.init()
    else:
        rank, size = 0, 1
    session: Session | None = None
    pending: list[str] = []

    def interrupt(reason: str) -> None:
        if session is not None:
            session.request_stop(reason)
        else:
            pending.append(reason)

    lifeline = Lifeline(args.lifeline, rank, interrupt) if args.lifeline else None
    progress = None
    if rank == 0 and not args.quiet:
        progress = RemoteProgress(lifeline, run.total_steps) if lifeline else Progress(run.total_steps)
    run_dir = args.run_dir or default_run_dir(run.name, run.run_root)
    try:
        session = Session(run, run_dir, rank, size, args.resume, args.iterations, progress=progress, lifeline=lifeline)
        for reason in pending:
            session.request_stop(reason)
        runners[roles[rank]](session, rank)
    except BaseException as error:
        if session is not None:
            session.fail(error)
        elif lifeline is not None:
            lifeline.send("error", reason=f"{type(error).__name__}: {error}")
        raise
    session.finish()
    if lifeline is not None:
        lifeline.close()
