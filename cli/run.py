"""``rlgen run`` and ``rlgen eval``: argument parsing and reporting only.

Exit codes: 0 finished (or stopped cleanly by Ctrl-C, with a final checkpoint), 1 invalid
spec or a failed run (the message names the rank and its error), 2 usage or I/O error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlgen.cli import EXIT_INVALID as EXIT_FAILED
from rlgen.cli import EXIT_OK, EXIT_USAGE, UsageError, override_argv, setting_args, settings_given


def _build_for(args: argparse.Namespace) -> tuple[Path | None, int]:
    """The build directory to run: TARGET itself, or a fresh build of the spec TARGET."""
    from rlgen.codegen.build import BuildError, build
    from rlgen.codegen.cli import validated

    target = Path(args.target)
    if target.is_dir():
        if args.policy or args.workers or args.hosts or settings_given(args):
            print(
                "rlgen run: error: --policy/--workers/--hosts/--seed/--set apply to a spec; a build directory is "
                "fixed (rebuild it with `rlgen build SPEC --policy ...`)",
                file=sys.stderr,
            )
            return None, EXIT_USAGE
        return target, EXIT_OK
    args.spec = str(target)
    result, code = validated(args)
    if result is None:
        return None, code
    if result.spec.deploy.policy == "auto":
        args.auto = _chooser(args, result)
        if args.auto is None:
            return None, EXIT_FAILED
        if not args.recalibrate and args.auto.recall(_history(result.spec.to_dict(), result.spec.deploy.hosts)):
            args.recalled, args.auto = args.auto, None  # start straight under the choice
            args.policy, args.workers = args.recalled.choice.policy, args.recalled.choice.workers
        else:
            args.policy, args.workers = "single", 1  # the run starts under single: its first iterations profile
        result, code = validated(args)
        if result is None:
            return None, code
    policy = result.spec.deploy.policy
    out = (
        Path(args.build_dir)
        if args.build_dir
        else Path("build") / f"{result.spec.name}-{policy}-{result.spec.deploy.workers}"
    )
    try:
        build(result, out)
    except BuildError as exc:
        print(f"rlgen run: error: {exc}", file=sys.stderr)
        return None, EXIT_FAILED
    return out, EXIT_OK


def _chooser(args: argparse.Namespace, result):
    """The auto policy's chooser for this spec: the candidates it validates under."""
    from rlgen.api import validate_file
    from rlgen.codegen.policies import POLICIES
    from rlgen.machine import local_cores
    from rlgen.runtime.auto import Chooser, worker_counts

    spec, hosts = result.spec, list(result.spec.deploy.hosts)
    candidates = []
    for workers in worker_counts(hosts, local_cores(), spec.deploy.workers):
        for policy in (p for p in POLICIES if p != "single"):
            if validate_file(args.spec, policy=policy, workers=workers, hosts=hosts, settings=settings_given(args)).ok:
                candidates.append((policy, workers))
    # env calls and gradient steps per iteration are set from the single build's plan
    return Chooser(
        Path(args.spec),
        candidates,
        spec.train.total_steps,
        0,
        0,
        run_dir=Path(),
        hosts=hosts,
        model=spec,
        budget_s=args.calibration_budget,
        extra=override_argv(args),
    )


def cmd_run(args: argparse.Namespace) -> int:
    from rlgen.runtime import launch
    from rlgen.runtime.session import default_run_dir

    if args.target is None and args.resume is None:
        print("rlgen run: error: give a spec or build directory, or --resume RUN_DIR", file=sys.stderr)
        return EXIT_USAGE
    if args.resume is not None and args.target is None and settings_given(args):
        print(
            "rlgen run: error: --seed/--set change the spec; a run resumes with the spec it started with",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.resume is not None:
        run_dir = Path(args.resume)
        try:
            doc = json.loads((run_dir / "run.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"rlgen run: error: --resume {run_dir}: not a run directory ({exc})", file=sys.stderr)
            return EXIT_USAGE
        build_dir = Path(args.target) if args.target else Path(doc["build_dir"])
    else:
        if not Path(args.target).exists():
            print(f"rlgen run: error: {args.target} does not exist", file=sys.stderr)
            return EXIT_USAGE
        build_dir, code = _build_for(args)
        if build_dir is None:
            return code
    try:
        info = launch.BuildInfo.read(build_dir)
        run_dir = Path(args.resume) if args.resume else Path(args.run_dir or default_run_dir(info.name, info.run_root))
        rank_args = ["--run-dir", str(run_dir.resolve())]
        rank_args += ["--resume"] if args.resume else []
        rank_args += ["--iterations", str(args.iterations)] if args.iterations else []
        rank_args += ["--quiet"] if args.quiet else []
        rank_args += ["--calibrate"] if args.calibrate else []
        cluster = _cluster(args, info, doc if args.resume else {})
        if cluster is None:
            return EXIT_USAGE
        cmd = launch.horovod_command(info, cluster, rank_args) if info.workers > 1 else None
        if args.dry_run:
            print(launch.describe(info, cmd))
            return EXIT_OK
        launch.prepare_run_dir(run_dir, info, bool(args.resume))
        auto = getattr(args, "auto", None)
        if auto is not None:
            return _run_auto(args, auto, info, rank_args, run_dir)
        recalled = getattr(args, "recalled", None)
        if recalled is not None:
            recalled.run_dir = run_dir
            if args.quiet:
                recalled.note = lambda line: None
            recalled.publish()
        if cmd is None:
            launch.run_in_process(info, rank_args, run_dir, verbose=args.verbose)
        else:
            launch.run_distributed(info, cmd, run_dir, quiet=args.quiet, cluster=cluster)
    except launch.LaunchError as exc:
        print(f"rlgen run: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not args.resume:
        _remember(info, cluster.hosts, _rows(run_dir))
    _curves(args, run_dir)
    return EXIT_OK


def _curves(args: argparse.Namespace, run_dir: Path) -> None:
    """``curves.png`` in the run directory (not for --policy auto's calibration runs), drawn by
    a detached ``rlgen plot`` so that the run's command returns without waiting for matplotlib
    (1.2 s per run here); the picture appears whole (written aside, then renamed) about a second
    later. Without matplotlib nothing is drawn; a failure to draw lands in ``ranks/launch.log``."""
    if args.calibrate:
        return
    import subprocess

    log = run_dir / "ranks" / "launch.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err:
        subprocess.Popen(
            [sys.executable, "-m", "rlgen", "plot", str(run_dir), "-o", str(run_dir / "curves.png")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )


def _history(spec: dict, hosts):
    from rlgen.runtime.history import History, key_of

    return History(key_of(spec, hosts))


def _rows(run_dir: Path) -> list[dict]:
    from rlgen.runtime.metricslog import read_metrics

    return read_metrics(run_dir)


def _remember(info, hosts, rows: list[dict]) -> None:
    """Keep the speed of the build's run on this machine for ``--policy auto`` (rlgen.runtime.history)."""
    spec = json.loads((info.build_dir / "spec.resolved.json").read_text())
    _history(spec, hosts).add(info.policy, info.workers, rows, info.name)


def _cluster(args: argparse.Namespace, info, recorded: dict):
    """Where the ranks go: ``--hosts``/``--hostfile`` and the ssh options, else what the run
    recorded (``--resume``), else the build's hosts. None (after a message) if too few slots."""
    from rlgen.runtime.hosts import Cluster

    was = recorded.get("cluster") or {}
    cluster = Cluster(
        tuple(args.hosts or was.get("hosts") or info.hosts),
        args.network_interface or was.get("interface"),
        args.ssh_port or was.get("ssh_port"),
        args.ssh_identity_file or was.get("ssh_identity"),
    )
    slots = cluster.slots()
    if cluster.hosts and slots < info.workers:
        print(
            f"rlgen run: error: the hosts {','.join(cluster.hosts)} offer {slots} slot(s) for the build's "
            f"{info.workers} ranks; add hosts or slots (host:slots)",
            file=sys.stderr,
        )
        return None
    return cluster


def _run_auto(args: argparse.Namespace, auto, info, rank_args: list[str], run_dir: Path) -> int:
    """Start under single with the chooser as its profile hook; go on under its choice."""
    from rlgen.codegen.build import BuildError, build
    from rlgen.codegen.cli import validated
    from rlgen.runtime import launch, rank
    from rlgen.runtime.auto import PROFILE_ITERATIONS

    auto.run_dir = run_dir
    auto.shape(json.loads((info.build_dir / "plan.json").read_text())["run"]["steps_per_iteration"])
    if args.quiet:
        auto.note = lambda line: None
    rank.PROFILE = (PROFILE_ITERATIONS, auto.decide)
    try:
        launch.run_in_process(info, rank_args, run_dir, verbose=args.verbose)
    finally:
        rank.PROFILE = None
    choice = auto.choice
    profiled = auto.record.get("profile", {}).get("iterations", 0) if auto.record else 0
    if choice is None or choice.policy == "single":
        _remember(info, auto.hosts, _rows(run_dir))
        _curves(args, run_dir)
        return EXIT_OK
    _remember(info, auto.hosts, _rows(run_dir)[:profiled])
    args.policy, args.workers = choice.policy, choice.workers
    result, code = validated(args)
    if result is None:
        return code
    out = Path(args.build_dir or "build") / f"{result.spec.name}-{choice.policy}-{choice.workers}"
    try:
        build(result, out)
    except BuildError as exc:
        print(f"rlgen run: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    chosen = launch.BuildInfo.read(out)
    launch.prepare_run_dir(run_dir, chosen, resume=True)
    launch.record_build(run_dir, chosen)
    cluster = _cluster(args, chosen, {})
    if cluster is None:
        return EXIT_USAGE
    trial = ["--trial", auto.trial_floor()] if auto.trial else []
    started = time.perf_counter()
    resume_args = _resumed(args, rank_args, profiled) + trial
    launch.run_distributed(chosen, launch.horovod_command(chosen, cluster, resume_args), run_dir, args.quiet, cluster)
    rows = _rows(run_dir)
    _remember(chosen, cluster.hosts, rows[profiled:])
    if auto.trial:
        doc = json.loads((run_dir / "run.json").read_text())
        kept = doc.get("status") != "switching"
        auto.tried(doc.get("trial_steps_per_s"), kept, time.perf_counter() - started)
        if not kept:  # slower than single: single goes on from the tried policy's last checkpoint
            launch.prepare_run_dir(run_dir, info, resume=True)
            launch.record_build(run_dir, info)
            done = rows[-1]["iteration"] if rows else profiled
            if not args.iterations or args.iterations > done:
                launch.run_in_process(info, _resumed(args, rank_args, done), run_dir, verbose=args.verbose)
            _remember(info, auto.hosts, _rows(run_dir)[len(rows) :])
    _curves(args, run_dir)
    return EXIT_OK


def _resumed(args: argparse.Namespace, rank_args: list[str], done: int) -> list[str]:
    """The rank arguments that resume the run after ``done`` iterations (``--iterations``
    counts from the run's start)."""
    out = [*rank_args, "--resume"]
    if args.iterations:
        out[out.index("--iterations") + 1] = str(max(args.iterations - done, 0))
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    try:
        doc = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"rlgen eval: error: {run_dir} is not a run directory ({exc})", file=sys.stderr)
        return EXIT_USAGE
    name = "policy-best" if args.best else "policy"
    if not (run_dir / name / "saved_model.pb").is_file():
        why = "no periodic evaluation ran (train.eval.every)" if args.best else "the run did not finish"
        print(f"rlgen eval: error: {run_dir} has no {name}/ ({why})", file=sys.stderr)
        return EXIT_FAILED
    video = Path(args.video) if args.video else None
    if video is not None:
        _need_video_writer()
    from rlgen.runtime.evaluate import VideoError
    from rlgen.runtime.tfimport import native_stderr_aside

    # TensorFlow's native log lines (the XLA cache's notices, say) stay off the terminal
    try:
        with native_stderr_aside(None, replay_on_error=False):
            returns = _evaluate(run_dir / name, doc["config"]["env"], args.episodes, args.seed, video, name)
    except (ImportError, VideoError) as exc:  # a custom env factory not importable from here; no frames to record
        print(f"rlgen eval: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    out = {
        "episodes": len(returns),
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "min": float(returns.min()),
        "max": float(returns.max()),
    }
    if video is not None:
        from rlgen.runtime.evaluate import video_paths

        out["videos"] = [str(p) for p in video_paths(video, name, len(returns)) if p.is_file()]
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"{run_dir}: {out['episodes']} episodes, return {out['mean_return']:.1f} ± {out['std_return']:.1f} "
            f"(min {out['min']:.1f}, max {out['max']:.1f})"
        )
        if video is not None:
            print(f"{len(out['videos'])} videos in {video}/ ({name}-episode-K.mp4: episode K of the returns)")
    return EXIT_OK


def _evaluate(policy_dir: Path, env: dict, episodes: int, seed: int, video: Path | None, name: str):
    """The returns of ``episodes`` episodes of the exported policy in ``policy_dir``."""
    import tensorflow as tf

    from rlgen.runtime.evaluate import PolicyEvaluation

    policy = tf.saved_model.load(str(policy_dir))
    return PolicyEvaluation(policy.act, env, episodes, seed)(video, name)


def _need_video_writer() -> None:
    """``--video``: gymnasium's RecordVideo writes its mp4s with moviepy, the ``video`` extra."""
    try:
        import moviepy  # noqa: F401
    except ImportError:
        raise UsageError(
            "--video needs moviepy: install the video extra (pip install 'rlgen[video]'; scripts/setup.sh does)"
        ) from None


def cmd_bench(args: argparse.Namespace) -> int:
    from rlgen.codegen.policies import POLICIES
    from rlgen.runtime.bench import bench, format_table

    policies = [p.strip() for p in (args.policies or ",".join(POLICIES)).split(",") if p.strip()]

    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"rlgen bench: error: unknown policies {unknown}; choose from {', '.join(POLICIES)}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.spec).is_file():
        print(f"rlgen bench: error: {args.spec} does not exist", file=sys.stderr)
        return EXIT_USAGE
    from rlgen.api import validate_file
    from rlgen.dsl.diagnostics import Severity

    skip = {}
    for policy in policies:
        workers = 1 if policy == "single" else args.workers
        result = validate_file(args.spec, policy=policy, workers=workers, settings=settings_given(args))
        if not result.ok:
            first = next(d for d in result.diagnostics if d.severity is Severity.ERROR)
            skip[policy] = f"{first.message} ({first.code})"
    results = bench(
        Path(args.spec), policies, args.workers, args.iterations, not_applicable=skip, extra=override_argv(args)
    )
    print(format_table(results))
    from rlgen.machine import cache_dir

    print(f"(speeds kept in {cache_dir() / 'auto'} for `rlgen run --policy auto` on this machine)")
    return EXIT_OK if all(r.ok or not r.applies for r in results) else EXIT_FAILED


def register(sub, deploy_args) -> None:
    """Add ``run``, ``eval`` and ``bench`` to the ``rlgen`` sub-command parser."""
    p = sub.add_parser(
        "run",
        help="build (if given a spec) and train",
        description="Train a spec or a build directory under its distribution policy: "
        "`single` in this process, the others under horovodrun --gloo.",
    )
    p.add_argument("target", nargs="?", metavar="SPEC|BUILD_DIR", help="a .rl.yaml spec or an rlgen build directory")
    p.add_argument("--run-dir", metavar="DIR", help="run directory (default runs/<name>-<time>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    p.add_argument("--iterations", type=int, metavar="K", help="stop after K iterations")
    p.add_argument("--build-dir", metavar="DIR", help="where to build a spec (default build/<name>-<policy>-<N>)")
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
        "time per part (inference, env, buffer, update, comm) side by side.",
    )
    p.add_argument("spec", metavar="SPEC")
    p.add_argument(
        "--policies",
        default=None,
        help="comma-separated policies (default: every one)",
    )
    p.add_argument("--workers", type=int, default=2, help="workers for the distributed policies (default 2)")
    p.add_argument("--iterations", type=int, default=20, help="iterations per policy (default 20)")
    setting_args(p)
    p.set_defaults(func=cmd_bench)
