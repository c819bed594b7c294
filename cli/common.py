"""What every command of the command line shares: the exit codes, the argument groups, the
request objects made from arguments, and the one place where an error becomes an exit code.

Exit codes (documented in the README and tested):

* 0 — success (every spec valid; build written; training finished or stopped by Ctrl-C)
* 1 — invalid spec (diagnostics printed), or a failed run (the rank and its error named)
* 2 — usage or I/O error (bad arguments, missing file, unwritable output, a busy run directory)
* 3 — internal error (a bug in rlgen; set RLGEN_DEBUG=1 for the traceback)
* 130 — interrupted (a second Ctrl-C or SIGTERM, before the run stopped cleanly)
* 143 — a run stopped cleanly by SIGTERM (a scheduler's stop: checkpoint written, run.json
  ``terminated``), so that a scheduler can tell it from a finished run and requeue it
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections.abc import Callable, Sequence

from rlgen.app.errors import AppError, Failed, Interrupted, InvalidSpec, UsageError
from rlgen.app.spec import Deployment

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143

Command = Callable[[argparse.Namespace], int]


def color(stream) -> bool:  # noqa: ANN001 - a text stream
    return stream.isatty() and "NO_COLOR" not in os.environ


def say(command: str, message: str) -> None:
    """``rlgen COMMAND: error: MESSAGE`` on stderr, control characters escaped."""
    from rlgen.dsl.report import shown

    print(f"rlgen {command}: error: {shown(message)}", file=sys.stderr)


def print_diagnostics(diagnostics: list, sources: dict[str, str], stream=None) -> None:  # noqa: ANN001
    from rlgen.dsl.report import REPORTERS

    stream = stream or sys.stderr
    text = REPORTERS["text"](diagnostics, sources, color(stream))
    if text:
        print(text, file=stream)


def run_command(command: str, func: Command, args: argparse.Namespace) -> int:
    """``func(args)``, with every error it ends with turned into its message and exit code."""
    try:
        return func(args)
    except InvalidSpec as exc:
        print_diagnostics(exc.diagnostics, exc.sources)
        if exc.message:
            say(command, exc.message)
        return EXIT_INVALID
    except UsageError as exc:
        say(command, str(exc))
        return EXIT_USAGE
    except Failed as exc:
        say(command, str(exc))
        return EXIT_INVALID
    except Interrupted as exc:
        say(command, str(exc))
        return EXIT_INTERRUPTED
    except AppError as exc:  # a kind not mapped above is a bug
        raise RuntimeError(f"unmapped {type(exc).__name__}: {exc}") from exc
    except KeyboardInterrupt:
        print(f"rlgen {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


def expand(patterns: Sequence[str]) -> list[str]:
    """Files named or matched by globs (``-`` is standard input)."""
    files: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern) and not os.path.lexists(pattern):  # spec[1].rl.yaml is a name
            matched = sorted(glob.glob(pattern, recursive=True))
            if not matched:
                raise UsageError(f"no files match '{pattern}'")
            files.extend(matched)
        else:
            files.append(pattern)
    return files


# --- argument groups ----------------------------------------------------------------------
def _hosts(value: str) -> list[str]:
    return [h.strip() for h in value.split(",") if h.strip()]


def _hostfile(value: str) -> list[str]:
    from rlgen.dsl.hosts import HostfileError, read_hostfile

    try:
        return read_hostfile(value)
    except HostfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _setting(value: str):  # noqa: ANN202 - an rlgen.dsl.overrides.Setting
    from rlgen.dsl.overrides import OverrideError, parse_setting

    try:
        return parse_setting(value)
    except OverrideError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def setting_args(p: argparse.ArgumentParser) -> None:
    """``--seed`` and ``--set``: any value of the spec, for this command only."""
    g = p.add_argument_group("overrides (this command only; the file is unchanged)")
    g.add_argument("--seed", type=int, metavar="N", help="the run's seed (train.seed)")
    g.add_argument(
        "--set",
        type=_setting,
        action="append",
        metavar="PATH=VALUE",
        help="set a value, checked as if written in the file (repeatable): e.g. components.learner.lr=3e-4, "
        "networks.pi.hidden=[128,128]",
    )


def _devices(value: str) -> str | dict[str, str]:
    from rlgen.dsl.devices import parse_flag

    try:
        return parse_flag(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def deploy_args(p: argparse.ArgumentParser) -> None:
    """``--policy``, ``--workers``, ``--hosts``/``--hostfile``, and :func:`setting_args`."""
    from rlgen.codegen.policies import AUTO, POLICIES

    g = p.add_argument_group("deployment overrides (the algorithm part of the spec is unchanged)")
    names = [*POLICIES, AUTO]
    policy = g.add_argument("--policy", help=f"distribution policy: {', '.join(names)}")
    policy.completer = lambda prefix, **_: [n for n in names if n.startswith(prefix)]  # shell completion
    g.add_argument("--workers", type=int, metavar="N", help="number of processes (Horovod ranks)")
    where = g.add_mutually_exclusive_group()
    where.add_argument("--hosts", type=_hosts, metavar="H1:S,H2:S", help="hosts and slots, e.g. node1:2,node2:2")
    where.add_argument(
        "--hostfile",
        dest="hosts",
        type=_hostfile,
        metavar="FILE",
        help="hosts and slots from a file of 'HOST slots=N' lines (as horovodrun reads it)",
    )
    g.add_argument(
        "--devices",
        type=_devices,
        metavar="DEVICE|SIDE=DEVICE,...",
        help="where compute fragments run: cpu, gpu, gpu:N or auto for every side, or by side, "
        "e.g. learner=gpu,actors=cpu (docs/devices.md)",
    )
    setting_args(p)


def deployment(args: argparse.Namespace) -> Deployment:
    """The overrides a command was given, as the request object every command takes."""
    from rlgen.dsl.overrides import settings_of

    hosts = getattr(args, "hosts", None)
    return Deployment(
        getattr(args, "policy", None),
        getattr(args, "workers", None),
        tuple(hosts) if hosts is not None else None,
        settings_of(getattr(args, "seed", None), getattr(args, "set", None)),
        getattr(args, "devices", None),
    )
