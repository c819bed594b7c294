"""``rlgen tune``: argument parsing and printing (:mod:`rlgen.app.tune` does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import EXIT_INVALID, EXIT_OK, deploy_args, deployment, say


def cmd_tune(args: argparse.Namespace) -> int:
    from rlgen.app.tune import TuneRequest, table, tune

    request = TuneRequest(
        Path(args.spec), Path(args.space), args.trials, Path(args.out) if args.out else None, deployment(args)
    )
    outcome = tune(request, report=lambda line: print(line, flush=True))
    print(table(outcome))
    if outcome.best is None:
        say("tune", f"no trial completed (logs: {outcome.out}/trial-*.log)")
        return EXIT_INVALID
    print(
        f"best: trial {outcome.best.number + 1}, {outcome.objective} {outcome.best.value:.4g}; spec {outcome.best_spec}"
    )
    return EXIT_OK


def register(sub) -> None:  # noqa: ANN001 - argparse's sub-parsers
    """Add ``tune`` to the ``rlgen`` sub-command parser."""
    p = sub.add_parser(
        "tune",
        help="search a spec's hyper-parameters (Optuna)",
        description="Train TRIALS runs of a spec with values sampled from a search space (TPE, seeded by the "
        "spec's train.seed), stop poor ones early (median pruner), and write the best as a spec. "
        "Needs the tune extra (pip install 'rlgen[tune]').",
    )
    p.add_argument("spec", metavar="SPEC", help="the .rl.yaml spec")
    p.add_argument("--space", required=True, metavar="FILE", help="the search space (docs/tuning.md)")
    p.add_argument("--trials", type=int, default=20, metavar="N", help="trials to run (default 20)")
    p.add_argument("--out", metavar="DIR", help="where trials and results go (default runs/<name>-tune-<time>)")
    deploy_args(p)
    p.set_defaults(func=cmd_tune)
