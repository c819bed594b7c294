"""``rlgen run``, ``rlgen eval`` and ``rlgen bench``: argument parsing and printing
(:mod:`rlgen.app.run`, :mod:`rlgen.app.evaluate` and :mod:`rlgen.app.bench` do the work)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import EXIT_INVALID, EXIT_OK, EXIT_TERMINATED, deploy_args, deployment, setting_args


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def cmd_run(args: argparse.Namespace) -> int:
    from rlgen.app.run import RunRequest, run

    request = RunRequest(
        target=_path(args.target),
        resume=_path(args.resume),
        run_dir=_path(args.run_dir),
        build_dir=_path(args.build_dir),
        iterations=args.iterations,
        deployment=deployment(args),
        dry_run=args.dry_run,
        quiet=args.quiet,
        verbose=args.verbose,
        calibrate=args.calibrate,
        recalibrate=args.recalibrate,
        calibration_budget=args.calibration_budget,
        network_interface=args.network_interface,
        ssh_port=args.ssh_port,
        ssh_identity_file=args.ssh_identity_file,
    )
    outcome = run(request)
    if outcome.description:
        print(outcome.description)
    return EXIT_TERMINATED if outcome.status == "terminated" else EXIT_OK


def cmd_eval(args: argparse.Namespace) -> int:
    from rlgen.app.evaluate import EvalRequest, evaluate

    out = evaluate(EvalRequest(Path(args.run_dir), args.episodes, args.seed, args.best, _path(args.video)))
    if args.json:
        print(json.dumps(out.to_dict()))
        return EXIT_OK
    print(
        f"{out.run_dir}: {out.episodes} episodes, return {out.mean_return:.1f} ± {out.std_return:.1f} "
        f"(min {out.min:.1f}, max {out.max:.1f})"
    )
    if out.agents:  # the same figures as training's return and <group>/return
        print(
            f"(return: the mean over the {out.agents} agents of each agent's return, as training logs it; "
            f"team return, their sum: {out.team_mean_return:.1f} ± {out.std_return * out.agents:.1f})"
        )
    for group, (mean, std) in out.groups.items():
        print(f"  {group}: return {mean:.1f} ± {std:.1f} (mean over the group's agents)")
    if out.best_is_final:
        print(f"(the best evaluated policy is the final one, at {out.best_at:,} env steps: rlgen eval shows the same)")
    elif out.best_at is not None:
        print(f"(the best evaluated policy, from {out.best_at:,} env steps)")
    if out.videos or args.video:
        print(f"{len(out.videos)} videos in {args.video}/ ({out.policy}-episode-K.mp4: episode K of the returns)")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from rlgen.app.bench import BenchRequest, compare, format_table
    from rlgen.machine import cache_dir

    policies = tuple(p.strip() for p in (args.policies or "").split(",") if p.strip())
    request = BenchRequest(Path(args.spec), policies, args.workers, args.iterations, deployment(args))
    results = compare(request)
    print(format_table(results))
    print(f"(speeds kept in {cache_dir() / 'auto'} for `rlgen run --policy auto` on this machine)")
    return EXIT_OK if all(r.ok or not r.applies for r in results) else EXIT_INVALID


def register(sub) -> None:  # noqa: ANN001 - argparse's sub-parsers
    """Add ``run``, ``eval`` and ``bench`` to the ``rlgen`` sub-command parser."""
    p = sub.add_parser(
        "run",
        help="build (if given a spec) and train",
        description="Train a spec or a build directory under its distribution policy: "
        "`single` in this process, the others under horovodrun --gloo. Ctrl-C or SIGTERM stops it "
        "cleanly with a checkpoint (exit 0, and 143 for SIGTERM); --resume goes on from there.",
    )
    p.add_argument("target", nargs="?", metavar="SPEC|BUILD_DIR", help="a .rl.yaml spec or an rlgen build directory")
    p.add_argument("--run-dir", metavar="DIR", help="run directory (default runs/<name>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.add_argument("--iterations", type=int, metavar="K", help="stop after K iterations")
    p.add_argument(
        "--build-dir", metavar="DIR", help="where to build a spec (default: in the run directory, build/<policy>-<N>)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the launch command and rank plan, then stop")
    p.add_argument("--calibrate", action="store_true", help=argparse.SUPPRESS)  # --policy auto's measurements
    p.add_argument(
        "--recalibrate",
        action="store_true",
        help="--policy auto: ignore what this machine measured for the spec before; profile and measure afresh",
    )
    p.add_argument(
        "--calibration-budget",
        type=float,
        metavar="S",
        help="--policy auto: seconds it may spend measuring candidates (default: 10%% of the run's expected length)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's own log output (otherwise in RUN_DIR/ranks/launch.log)",
    )
    deploy_args(p)
    g = p.add_argument_group("reaching other hosts (passed to horovodrun; docs/cluster.md)")
    g.add_argument(
        "--network-interface", metavar="NAME", help="the interface the ranks talk over, named the same on every host"
    )
    g.add_argument("--ssh-port", type=int, metavar="PORT", help="ssh port of every host")
    g.add_argument("--ssh-identity-file", metavar="FILE", help="ssh key for every host")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "eval",
        help="evaluate a trained policy",
        description="Run the exported policy of a run directory for whole episodes.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--episodes", type=int, default=10, help="episodes (default 10)")
    p.add_argument("--seed", type=int, default=12345, help="seed of the evaluation envs")
    p.add_argument(
        "--best", action="store_true", help="the policy of the best periodic evaluation (policy-best/), not the last"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--video",
        metavar="DIR",
        help="record the episodes, one after another, as DIR/<policy>-episode-K.mp4 (needs the video extra)",
    )
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "bench",
        help="compare distribution policies on a spec",
        description="Run K iterations of a spec under each policy and print steps/s and the "
        "time per part (inference, env, buffer, update, comm) side by side, of rank 0 and of the other ranks.",
    )
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--policies", default=None, help="comma-separated policies (default: every one)")
    p.add_argument("--workers", type=int, default=2, help="workers for the distributed policies (default 2)")
    p.add_argument("--iterations", type=int, default=20, help="iterations per policy (default 20)")
    setting_args(p)
    p.set_defaults(func=cmd_bench)
