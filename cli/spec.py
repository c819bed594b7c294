"""``rlgen validate``, ``rlgen schema`` and ``rlgen init``: the commands about specs themselves
(none imports TensorFlow)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from rlgen.app.errors import UsageError

from .common import EXIT_INVALID, EXIT_OK, color, deploy_args, deployment, expand


def cmd_validate(args: argparse.Namespace) -> int:
    from rlgen.api import validate_file
    from rlgen.dsl.diagnostics import Severity
    from rlgen.dsl.report import REPORTERS, shown

    overrides = deployment(args).overrides()
    results = []
    for f in expand(args.files):
        try:
            results.append(validate_file(f, **overrides))
        except OSError as exc:
            raise UsageError(f"cannot read {f}: {exc.strerror or exc}") from None
    diags = [d for r in results for d in r.diagnostics]
    if args.warnings_as_errors:
        diags = [d if d.severity is Severity.ERROR else dataclasses.replace(d, severity=Severity.ERROR) for d in diags]
    ok = not any(d.severity is Severity.ERROR for d in diags)
    if args.format == "json":
        per_file = [
            {"file": r.file, "valid": not any(d.file == r.file and d.severity is Severity.ERROR for d in diags)}
            for r in results
        ]
        print(json.dumps({"valid": ok, "files": per_file, "diagnostics": [d.to_dict() for d in diags]}, indent=2))
    else:
        out = REPORTERS[args.format](diags, {r.file: r.text for r in results}, color(sys.stdout))
        if out:
            print(out)
        if args.format == "text" and not args.quiet:
            for r in results:
                if not any(d.file == r.file for d in diags):
                    print(f"{shown(r.file)}: ok")
    return EXIT_OK if ok else EXIT_INVALID


def cmd_schema(args: argparse.Namespace) -> int:
    from rlgen.dsl.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    from rlgen.app.scaffold import InitRequest, default_algo, init

    algo = args.algo or default_algo(args.env)
    output = Path(args.output) if args.output else None
    out = init(InitRequest(args.name, args.env, algo, output, args.force, args.recurrent))
    print(f"wrote {out} ({algo} on {args.env}); it validates. Train it: rlgen run {out}")
    return EXIT_OK


def register(sub) -> None:  # noqa: ANN001 - argparse's sub-parsers
    p = sub.add_parser(
        "validate",
        help="check specs against the schema and semantic rules",
        description="Check .rl.yaml specs: YAML, JSON Schema, then semantic rules. "
        "Reports every error with file:line:column. Never imports TensorFlow. "
        "FILE may be - for standard input, or a pipe such as <(envsubst < spec).",
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
    deploy_args(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of the language",
        description="Print the JSON Schema (draft 2020-12) of the .rl.yaml language.",
    )
    p.set_defaults(func=cmd_schema)

    from rlgen.app.scaffold import ALGOS

    p = sub.add_parser(
        "init",
        help="write a commented starting spec for an algorithm and env",
        description="Write NAME.rl.yaml: ALGO on ENV_ID with the RL Zoo's tuned settings where it has "
        "them (Stable-Baselines3's defaults otherwise), shaped by the env's spaces; validated before it is written. "
        "MAPPO and IPPO take a PettingZoo env of many agents sharing their spaces, with the reference MAPPO's "
        "settings (marlbenchmark/on-policy).",
    )
    p.add_argument("name", metavar="NAME", help="the spec's name (and file name)")
    p.add_argument(
        "--algo",
        choices=ALGOS,
        help="the algorithm (default ppo; mappo for a PettingZoo env, where only mappo and ippo go)",
    )
    p.add_argument(
        "--env",
        required=True,
        metavar="ENV_ID",
        help="a gymnasium env id, e.g. CartPole-v1; or a PettingZoo env: simple_spread_v3 "
        "(mpe2.simple_spread_v3), a module such as mpe2.simple_spread_v3, or pkg.module:factory",
    )
    p.add_argument(
        "--recurrent",
        action="store_true",
        help="mappo/ippo: GRU policy and critic (the reference's rmappo), rollouts of whole episodes",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="where to write (default NAME.rl.yaml)")
    p.add_argument("--force", action="store_true", help="overwrite FILE")
    p.set_defaults(func=cmd_init)
