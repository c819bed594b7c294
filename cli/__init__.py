"""The ``rlgen`` command line. It parses arguments and picks a reporter; the work is elsewhere.

Exit codes (documented in the README and tested):

* 0 — success (every spec valid; build written; training finished)
* 1 — invalid spec (diagnostics printed)
* 2 — usage or I/O error (bad arguments, missing file, unwritable output)
* 3 — internal error (a bug in rlgen; set RLGEN_DEBUG=1 for the traceback)
* 130 — interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import sys
from collections.abc import Sequence

from rlgen import __version__

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """Bad arguments or unreadable files: exit 2 with a one-line message."""


def _expand(patterns: Sequence[str]) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matched = sorted(glob.glob(pattern, recursive=True))
            if not matched:
                raise UsageError(f"no files match '{pattern}'")
            files.extend(matched)
        else:
            files.append(pattern)
    return files


def _color(stream) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def _hosts(value: str) -> list[str]:
    return [h.strip() for h in value.split(",") if h.strip()]


def _hostfile(value: str) -> list[str]:
    from rlgen.dsl.hosts import HostfileError, read_hostfile

    try:
        return read_hostfile(value)
    except HostfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _setting(value: str):
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


def override_argv(args: argparse.Namespace) -> list[str]:
    """``--seed``/``--set`` as given, for the commands this one starts (calibration, bench rows)."""
    return [word for s in settings_given(args) for word in s.flag.split(" ", 1)]


def settings_given(args: argparse.Namespace) -> tuple:
    from rlgen.dsl.overrides import settings_of

    return settings_of(getattr(args, "seed", None), getattr(args, "set", None))


def _deploy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("deployment overrides (the algorithm part of the spec is unchanged)")
    from rlgen.codegen.policies import AUTO, POLICIES

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
    setting_args(p)


def deploy_overrides(args: argparse.Namespace) -> dict:
    """The overrides of a command (``--policy``, ``--workers``, ``--hosts``, ``--seed``,
    ``--set``), as keyword arguments of :func:`rlgen.api.validate_file`: every command applies
    them this one way."""
    return {"policy": args.policy, "workers": args.workers, "hosts": args.hosts, "settings": settings_given(args)}


def cmd_validate(args: argparse.Namespace) -> int:
    from rlgen.api import validate_file
    from rlgen.dsl.diagnostics import Severity
    from rlgen.dsl.report import REPORTERS

    files = _expand(args.files)
    results = []
    for f in files:
        try:
            results.append(validate_file(f, **deploy_overrides(args)))
        except OSError as exc:
            raise UsageError(f"cannot read {f}: {exc.strerror or exc}") from None
    diags = [d for r in results for d in r.diagnostics]
    if args.warnings_as_errors:
        diags = [d if d.severity is Severity.ERROR else _as_error(d) for d in diags]
    ok = not any(d.severity is Severity.ERROR for d in diags)
    if args.format == "json":
        per_file = [
            {"file": r.file, "valid": not any(d.file == r.file and d.severity is Severity.ERROR for d in diags)}
            for r in results
        ]
        print(json.dumps({"valid": ok, "files": per_file, "diagnostics": [d.to_dict() for d in diags]}, indent=2))
    else:
        sources = {r.file: r.text for r in results}
        out = REPORTERS[args.format](diags, sources, _color(sys.stdout))
        if out:
            print(out)
        if args.format == "text" and not args.quiet:
            for r in results:
                if not any(d.file == r.file for d in diags):
                    print(f"{r.file}: ok")
    return EXIT_OK if ok else EXIT_INVALID


def _as_error(d):
    import dataclasses

    from rlgen.dsl.diagnostics import Severity

    return dataclasses.replace(d, severity=Severity.ERROR)


def cmd_schema(args: argparse.Namespace) -> int:
    from rlgen.dsl.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlgen",
        description="Define an RL algorithm once (.rl.yaml); validate, build and run it under any distribution policy.",
        epilog="exit codes: 0 ok, 1 invalid spec, 2 usage or I/O error, 3 internal error",
    )
    parser.add_argument("--version", action="version", version=f"rlgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "validate",
        help="check specs against the schema and semantic rules",
        description="Check .rl.yaml specs: YAML, JSON Schema, then semantic rules. "
        "Reports every error with file:line:column. Never imports TensorFlow.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="spec files or globs (quote globs: 'specs/**/*.rl.yaml')")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text (default), json, or github (workflow annotations)",
    )
    p.add_argument("--warnings-as-errors", "-W", action="store_true", help="fail on warnings too")
    p.add_argument("--quiet", "-q", action="store_true", help="print only problems")
    _deploy_args(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of the language",
        description="Print the JSON Schema (draft 2020-12) of the .rl.yaml language.",
    )
    p.set_defaults(func=cmd_schema)

    from rlgen.codegen.cli import register as register_codegen

    register_codegen(sub, _deploy_args)
    from rlgen.runtime.cli import register as register_runtime

    register_runtime(sub, _deploy_args)
    from rlgen.runtime.tune import register as register_tune

    register_tune(sub, _deploy_args)
    from rlgen.runtime.plot import register as register_plot

    register_plot(sub)
    from rlgen.dsl.scaffold import register as register_init

    register_init(sub)
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
        return args.func(args)
    except UsageError as exc:
        print(f"rlgen {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"rlgen {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
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

    A process that imported TensorFlow (``rlgen run``, ``eval``) ends with ``os._exit`` once
    its output is flushed: the interpreter's own teardown of TensorFlow's modules and threads
    took 0.6 s after every run, and everything a run keeps is written and closed before
    ``main`` returns (metrics, checkpoints, the exported policy, TensorBoard's writer). Under a
    profiler or coverage tracer, or with ``RLGEN_DEBUG``, the interpreter exits as usual (so that
    they can write what they gathered)."""
    code = main()
    watched = sys.gettrace() is not None or sys.getprofile() is not None or os.environ.get("RLGEN_DEBUG")
    if "tensorflow" in sys.modules and not watched:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can reach it
                stream.flush()
        os._exit(code)
    raise SystemExit(code)
