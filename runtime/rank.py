"""What every rank does around its role's loop: arguments, Horovod, the lifeline, the session.

A generated ``main.py`` holds the build's data (``RUN``, which role each rank plays,
one ``run_<role>`` function per role) and hands them to :func:`main`::

    def main(argv=None):
        run_rank(RUN, ROLES, RUNNERS, argv, distributed=True)
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable, Mapping, Sequence

from rlgen.machine import local_cores

from . import devices as placement
from . import p2p
from .channels import Mesh, Stopped, connect
from .control import CONTROLS, LocalControl
from .evaluation import process, schedule
from .lifeline import Lifeline
from .progress import Progress, RemoteProgress
from .rundir import default_run_dir
from .session import RunConfig, Session
from .trial import Profile, parse_trial

Runner = Callable[[Session, int], None]


def _parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run-dir", help="run directory (default: <train.run_dir>/<name>-<time>)")
    parser.add_argument("--resume", action="store_true", help="continue from the run directory's last checkpoint")
    parser.add_argument("--iterations", type=int, help="stop after this many iterations")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--calibrate", action="store_true", help=argparse.SUPPRESS)  # a measurement (auto)
    parser.add_argument("--trial", help=argparse.SUPPRESS)  # FLOOR:K:SECONDS, a policy auto tries (Session)
    parser.add_argument("--lifeline", help=argparse.SUPPRESS)  # host:port:token of the launcher (rlgen run)
    return parser


def _channels(rank: int, size: int, lifeline: Lifeline | None) -> Mesh:
    """This rank's channels to rank 0 (rank 0: to every rank), addresses exchanged through Horovod.

    A rank advertises the address it reached the launcher from: on one machine the loopback,
    across hosts the interface that leads to the launcher's network."""
    from . import comm

    advertise = lifeline.local_address if lifeline else os.environ.get("RLGEN_ADVERTISE", "127.0.0.1")
    peers = range(1, size) if rank == 0 else [0]

    def exchange(row):
        return comm.gather(row, [row.size], "uint8").reshape(size, row.size)

    return connect(rank, size, peers, advertise, exchange)


def run_rank(
    run: RunConfig,
    roles: Mapping[int, str],
    runners: Mapping[str, Runner],
    argv: Sequence[str] | None = None,
    distributed: bool = False,
    control: str = "lockstep",
    collectives: bool = True,
    description: str = "",
    profile: Profile | None = None,
    devices: Mapping[str, str] | None = None,
) -> None:
    """Parse the rank's arguments, start Horovod and the channels (``distributed``), run this
    rank's role. ``control`` is how ranks agree on stopping (``lockstep``, ``aligned`` or
    ``stream``, see :mod:`rlgen.runtime.control`); without ``collectives`` in the loop,
    Horovod stops once the channels are up. ``profile``: ``--policy auto``'s, for a run in the
    launcher's own process (:mod:`rlgen.runtime.trial`). ``devices``: role → what its ranks
    ask for (``deploy.devices``); a rank asking for nothing, or ``cpu``, hides every GPU
    before TensorFlow initialises (:mod:`rlgen.runtime.devices`)."""
    from .tfutil import configure_threads

    args = _parser(description or f"rank entry of {run.name}").parse_args(argv)
    # horovodrun names each process's rank and its host's ranks before Horovod starts
    own = int(os.environ.get("HOROVOD_RANK", "0")) if distributed else 0
    local = int(os.environ.get("HOROVOD_LOCAL_SIZE", "1")) if distributed else 1
    threads = configure_threads(1, run.intra_op_threads(roles.get(own, ""), local_cores(), local))
    forked = None
    if schedule.wanted(run, own, args.calibrate):
        # before any op runs: the evaluator shares this import of TensorFlow, and builds its
        # own copy of the policy by rank 0's role
        forked = process.prefork(functools.partial(process.policy_of, runners[roles[0]]))
    local_rank = int(os.environ.get("HOROVOD_LOCAL_RANK", "0")) if distributed else 0
    placed = placement.setup((devices or {}).get(roles.get(own, "")), own, local_rank)
    if distributed:
        from . import comm

        rank, size = comm.init()
    else:
        rank, size = 0, 1
    used = _devices_used(placed, rank, size, distributed and devices is not None)
    session: Session | None = None
    pending: list[str] = []

    def interrupt(reason: str) -> None:
        if session is not None:
            session.request_stop(reason)
        else:
            pending.append(reason)

    lifeline = Lifeline(args.lifeline, rank, interrupt) if args.lifeline else None
    progress = None
    if rank == 0:  # --quiet: only the closing line (the launcher's own Progress is off)
        progress = (
            RemoteProgress(lifeline, run.total_steps) if lifeline else Progress(run.total_steps, enabled=not args.quiet)
        )
    run_dir = args.run_dir or default_run_dir(run.name, run.run_root)
    mesh = None
    try:
        placement.check(placed)  # a GPU asked for and none seen: one line, at start
        ctl = LocalControl()
        if distributed:
            mesh = _channels(rank, size, lifeline)
            p2p.attach(mesh)
            if not collectives:
                from . import comm

                comm.shutdown()
            ctl = CONTROLS[control](mesh, rank, size)
        session = Session(
            run,
            run_dir,
            rank,
            size,
            args.resume,
            args.iterations,
            progress=progress,
            lifeline=lifeline,
            control=ctl,
            profile=None if distributed else profile,
            calibrate=args.calibrate,
            threads=threads,
            trial=parse_trial(args.trial),
            evaluator=forked,
        )
        if rank == 0:
            session.run_dir.update({"devices": used})
        for reason in pending:
            session.request_stop(reason)
        try:
            runners[roles[rank]](session, rank)
        except Stopped:  # rank 0 decided to stop while this rank waited on a channel
            session.stop_reason = ctl.stop_reason()
    except BaseException as error:
        if session is not None:
            session.fail(error)
        elif lifeline is not None:
            lifeline.send("error", reason=f"{type(error).__name__}: {error}")
        raise
    session.finish()
    if mesh is not None:
        mesh.close()
    if lifeline is not None:
        lifeline.close()


def _devices_used(placed: placement.Placement, rank: int, size: int, gather: bool) -> dict[str, dict[str, str]]:
    """Every rank's device by name (``run.json``'s ``devices``): gathered from the ranks where
    the build places any fragment; otherwise every rank hid the GPUs and runs on CPU:0."""
    import json

    if not gather:
        return {str(r): placed.record() for r in range(size)}
    import numpy as np

    from . import comm

    row = json.dumps(placed.record()).encode()[:_ROW].ljust(_ROW)
    rows = comm.gather(np.frombuffer(row, np.uint8)[None], [1, _ROW], "uint8")
    return {str(r): json.loads(bytes(rows[r]).decode().strip()) for r in range(size)}


_ROW = 512  # bytes of one rank's entry
