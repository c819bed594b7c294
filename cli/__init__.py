"""The ``rlgen`` command line: it parses arguments, makes the request objects of :mod:`rlgen.app`,
prints what comes back, and maps errors to exit codes (:mod:`.common`); the work is elsewhere.

One module per group of commands: :mod:`.spec` (validate, schema, init), :mod:`.build` (build,
graph), :mod:`.run` (run, eval, bench), :mod:`.tune`, :mod:`.plot`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from rlgen import __version__

from .common import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, run_command


def build_parser() -> argparse.ArgumentParser:
    from . import build, plot, run, spec, tune

    parser = argparse.ArgumentParser(
        prog="rlgen",
        description="Define an RL algorithm once (.rl.yaml); validate, build and run it under any distribution policy.",
        epilog="exit codes: 0 ok, 1 invalid spec or failed run, 2 usage or I/O error, 3 internal error, "
        "130 interrupted, 143 stopped by SIGTERM",
    )
    parser.add_argument("--version", action="version", version=f"rlgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    spec.register(sub)
    build.register(sub)
    run.register(sub)
    tune.register(sub)
    plot.register(sub)
    p = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description='Print rlgen\'s tab completion for a shell. bash: eval "$(rlgen completion bash)" in '
        "~/.bashrc; zsh: the same in ~/.zshrc; fish: rlgen completion fish | source in config.fish.",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    p.set_defaults(func=cmd_completion)
    return parser


def cmd_completion(args: argparse.Namespace) -> int:
    from rlgen.app.errors import UsageError

    try:
        import argcomplete
    except ImportError:
        raise UsageError(
            "shell completion needs argcomplete: install the completion extra "
            "(pip install 'rlgen[completion]'; scripts/setup.sh does)"
        ) from None
    sys.stdout.write(argcomplete.shellcode(["rlgen"], shell=args.shell))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asking for completions (rlgen completion SHELL)
        try:
            import argcomplete
        except ImportError:
            return EXIT_USAGE
        argcomplete.autocomplete(parser)  # prints the completions and exits
    args = parser.parse_args(argv)
    try:
        return run_command(args.command, args.func, args)
    except Exception as exc:  # never show users a traceback unless asked
        if os.environ.get("RLGEN_DEBUG"):
            raise
        print(
            f"rlgen {args.command}: internal error: {type(exc).__name__}: {exc}\n"
            "This is a bug in rlgen; rerun with RLGEN_DEBUG=1 for the traceback and report it.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def entry() -> None:
    """The ``rlgen`` command (and ``python -m rlgen``): :func:`main`, then the exit.

    The directory rlgen runs from is importable, as ``python -m rlgen`` makes it: a spec's own
    parts (an env factory, wrappers, a custom network) are found the same way by the installed
    command, under every policy (the distributed ranks get it on their ``PYTHONPATH``).

    A process that imported TensorFlow (``rlgen run``, ``eval``) ends with ``os._exit`` once
    its output is flushed: the interpreter's own teardown of TensorFlow's modules and threads
    took 0.6 s after every run, and everything a run keeps is written and closed before
    ``main`` returns (metrics, checkpoints, the exported policy, TensorBoard's writer). Under a
    profiler or coverage tracer, or with ``RLGEN_DEBUG``, the interpreter exits as usual (so that
    they can write what they gathered)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    code = main()
    watched = sys.gettrace() is not None or sys.getprofile() is not None or os.environ.get("RLGEN_DEBUG")
    if "tensorflow" in sys.modules and not watched:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can reach it
                stream.flush()
        from rlgen.runtime.tfimport import fast_exit

        fast_exit(code)  # os._exit, after removing the process's own temporary files
    raise SystemExit(code)
