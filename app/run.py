"""``rlgen run``: build a spec (or take a build, or a run to resume), and train it under its
policy, in this process (``single``) or as Horovod ranks (:mod:`rlgen.launch`).

Where things go:

* the run directory: ``--run-dir``, else ``<train.run_dir>/<name>-<time>``; one ``rlgen run``
  at a time trains in it (:meth:`rlgen.runtime.rundir.RunDir.claim`);
* the build: ``--build-dir``, else inside the run directory (``build/<policy>-<workers>``), a
  copy of the build rendered once into the cache (``<cache>/builds/<key>``, reused while the
  spec, rlgen and the versions it renders with are unchanged), so that a run directory holds
  the very code it ran and ``--resume`` never depends on anything outside it.

``--policy auto`` is :mod:`.auto`'s: the run starts under ``single`` in this process and its
first iterations profile it, or it starts straight under what this machine measured fastest;
it may go on under another policy from a checkpoint, in the same run directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgen.dsl.resolved import resolved
from rlgen.launch.job import (
    Aborted,
    BuildInfo,
    LaunchError,
    describe,
    horovod_command,
    prepare_run_dir,
    record_build,
    run_distributed,
    run_in_process,
)
from rlgen.machine import cache_dir
from rlgen.runtime.rundir import RunDir, RunDirBusy

from . import child
from .errors import Failed, Interrupted, UsageError
from .spec import Deployment, validated

#: Builds in the cache not used for this many days are removed.
BUILD_CACHE_DAYS = 30


@dataclass(frozen=True)
class RunRequest:
    """What ``rlgen run`` was asked (every field a plain value)."""

    target: Path | None = None  # a spec or a build directory
    resume: Path | None = None  # a run directory to go on with
    run_dir: Path | None = None
    build_dir: Path | None = None
    iterations: int | None = None
    deployment: Deployment = Deployment()
    dry_run: bool = False
    quiet: bool = False
    verbose: bool = False
    calibrate: bool = False  # a measurement of --policy auto (no evaluation, checkpoints, curves)
    recalibrate: bool = False
    calibration_budget: float | None = None
    network_interface: str | None = None
    ssh_port: int | None = None
    ssh_identity_file: str | None = None


@dataclass
class RunOutcome:
    run_dir: Path | None
    description: str = ""  # --dry-run: the launch command and rank plan
    status: str = ""  # run.json's at the end: finished, interrupted, terminated, ...


@dataclass
class _Launch:
    """One launch being prepared: the build, where its ranks go, their arguments."""

    info: BuildInfo
    cluster: Any
    rank_args: list[str] = field(default_factory=list)


def run(request: RunRequest, note: Callable[[str], None] = print) -> RunOutcome:
    """Train (see the module docstring); ``note`` gets auto's lines. Raises :class:`UsageError`,
    :class:`rlgen.app.errors.InvalidSpec`, :class:`Failed` or :class:`Interrupted`."""
    if request.target is None and request.resume is None:
        raise UsageError("give a spec or build directory, or --resume RUN_DIR")
    if request.resume is not None and request.target is None and request.deployment.settings:
        raise UsageError("--seed/--set change the spec; a run resumes with the spec it started with")
    recorded: dict[str, Any] = {}
    result = chooser = recalled = info = None
    if request.resume is not None:
        run = RunDir(request.resume)
        try:
            recorded = run.read()
            build_dir = Path(request.target) if request.target else Path(recorded["build_dir"])
        except (OSError, ValueError, KeyError) as exc:
            why = "no run.json" if not run.is_run() else f"{type(exc).__name__}: {exc}"
            raise UsageError(f"--resume {run.path}: not a run directory ({why})") from None
        info = _info(build_dir)
    else:
        target = Path(request.target)
        if not target.exists():
            raise UsageError(f"{target} does not exist")
        if target.is_dir():
            if request.deployment.given:
                raise UsageError(
                    "--policy/--workers/--hosts/--seed/--set apply to a spec; a build directory is fixed "
                    "(rebuild it with `rlgen build SPEC --policy ...`)"
                )
            info = _info(target)
        else:
            result = validated(target, request.deployment)
            if result.spec.deploy.policy == "auto":
                result, chooser, recalled = _auto(request, result, note)
        run = RunDir(request.run_dir or _default_run_dir(result.spec if result else info))
    if request.dry_run:
        info = info or _info(_built(result, None, request.build_dir))
        cmd = horovod_command(info, _cluster(request, info, recorded), _rank_args(request, run))
        return RunOutcome(None, description=describe(info, cmd if info.workers > 1 else None))
    created = not run.path.exists()
    try:
        run.claim()
    except RunDirBusy as exc:
        raise UsageError(str(exc)) from None
    started = False
    try:
        if not request.resume and not run.fresh():
            raise UsageError(f"run directory {run.path} exists and is not empty; choose another or use --resume")
        info = info or _info(_built(result, run, request.build_dir))
        launch = _Launch(info, _cluster(request, info, recorded), _rank_args(request, run))
        try:
            prepare_run_dir(run, info, bool(request.resume))
        except LaunchError as exc:
            raise UsageError(str(exc)) from None
        started = True
        if chooser is not None:
            _run_auto(request, chooser, launch, run)
        else:
            if recalled is not None:
                recalled.run_dir = run
                recalled.publish()
            cmd = horovod_command(info, launch.cluster, launch.rank_args) if info.workers > 1 else None
            _launch(request, launch, run, cmd)
            if not request.resume:
                _remember(info, launch.cluster.hosts, run)
    except Aborted as exc:
        raise Interrupted(str(exc)) from None
    except LaunchError as exc:
        raise Failed(str(exc)) from None
    finally:
        run.release()
        if created and not started:  # nothing of a run was written: leave no directory behind
            shutil.rmtree(run.path, ignore_errors=True)
    if not request.calibrate:
        child.draw_curves(run.path, run.curves, run.launch_log)
    return RunOutcome(run.path, status=run.read().get("status", ""))


# --- where the build and the run go ---------------------------------------------------
def _info(build_dir: Path) -> BuildInfo:
    try:
        return BuildInfo.read(build_dir)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None


def _default_run_dir(spec_or_info: Any) -> Path:
    from rlgen.runtime.rundir import default_run_dir

    if isinstance(spec_or_info, BuildInfo):
        return default_run_dir(spec_or_info.name, spec_or_info.run_root)
    return default_run_dir(spec_or_info.name, spec_or_info.train.run_dir)


def _built(result: Any, run: RunDir | None, explicit: Path | None, suffix: str = "") -> Path:
    """The build of a validated spec: in ``explicit`` (``--build-dir``), else rendered into the
    cache (or reused from it) and copied into the run directory (``None``: a dry run, which
    describes the cached build; ``suffix``: after the policy and workers in its name there)."""
    from rlgen.codegen.build import BuildError, build, build_key

    deploy = result.spec.deploy
    try:
        if explicit is not None:
            build(result, explicit)
            return explicit
        cached = cache_dir() / "builds" / build_key(result, Path(result.file).name)[:20]
        build(result, cached)
        _prune_builds(cached)
    except BuildError as exc:
        raise Failed(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write the build: {exc.strerror or exc}") from None
    if run is None:
        return cached
    target = run.builds / f"{deploy.policy}-{deploy.workers}{suffix}"
    if not target.is_dir():
        try:
            shutil.copytree(cached, target)
        except OSError as exc:
            raise UsageError(f"cannot write the run directory {run.path}: {exc.strerror or exc}") from None
    return target


def _prune_builds(used: Path) -> None:
    """Mark ``used`` as used now; remove cached builds unused for :data:`BUILD_CACHE_DAYS`."""
    now = time.time()
    with contextlib.suppress(OSError):
        os.utime(used, (now, now))
        for entry in used.parent.iterdir():
            if entry.is_dir() and entry.stat().st_mtime < now - BUILD_CACHE_DAYS * 86400:
                shutil.rmtree(entry, ignore_errors=True)


def _rank_args(request: RunRequest, run: RunDir) -> list[str]:
    out = ["--run-dir", str(run.path.resolve())]
    out += ["--resume"] if request.resume else []
    out += ["--iterations", str(request.iterations)] if request.iterations else []
    out += ["--quiet"] if request.quiet else []
    out += ["--calibrate"] if request.calibrate else []
    return out


def _cluster(request: RunRequest, info: BuildInfo, recorded: dict[str, Any]):  # noqa: ANN202 - a Cluster
    """Where the ranks go: ``--hosts``/``--hostfile`` and the ssh options, else what the run
    recorded (``--resume``), else the build's hosts."""
    from rlgen.launch.hosts import Cluster

    was = recorded.get("cluster") or {}
    cluster = Cluster(
        tuple(request.deployment.hosts or was.get("hosts") or info.hosts),
        request.network_interface or was.get("interface"),
        request.ssh_port or was.get("ssh_port"),
        request.ssh_identity_file or was.get("ssh_identity"),
    )
    slots = cluster.slots()
    if cluster.hosts and slots < info.workers:
        raise UsageError(
            f"the hosts {','.join(cluster.hosts)} offer {slots} slot(s) for the build's "
            f"{info.workers} ranks; add hosts or slots (host:slots)"
        )
    return cluster


def _launch(request: RunRequest, launch: _Launch, run: RunDir, cmd: list[str] | None, profile: Any = None) -> None:
    if cmd is None:
        run_in_process(launch.info, launch.rank_args, run, verbose=request.verbose, profile=profile)
    else:
        run_distributed(launch.info, cmd, run, request.quiet, launch.cluster)


# --- what this machine measured ---------------------------------------------------------
def _history(spec: dict[str, Any], hosts: Any):  # noqa: ANN202 - a History
    from .history import History, key_of

    return History(key_of(spec, hosts))


def _remember(info: BuildInfo, hosts: Any, run: RunDir, rows: slice = slice(None)) -> None:
    """Keep the speed of the build's run on this machine for ``--policy auto`` (:mod:`.history`)."""
    import json

    from rlgen.dsl.devices import placement
    from rlgen.machine import gpu_visible
    from rlgen.runtime.metricslog import read_metrics

    spec = json.loads((info.build_dir / "spec.resolved.json").read_text())
    devices = placement((spec.get("deploy") or {}).get("devices"), gpu_visible())
    rows_kept = read_metrics(run.path)[rows]
    _history(spec, hosts).add(info.policy, info.workers, rows_kept, info.name, devices, run.intra_op_threads())


# --- --policy auto ------------------------------------------------------------------------
def _auto(request: RunRequest, result: Any, note: Callable[[str], None]) -> tuple[Any, Any, Any]:
    """The spec validated for where the run starts, and auto's chooser: (result, chooser to
    profile with, None), or (result, None, chooser that recalled the choice)."""
    from rlgen.api import validate_file
    from rlgen.codegen.policies import POLICIES
    from rlgen.dsl.devices import auto_placements, flag_text
    from rlgen.machine import gpu_visible, local_cores

    from .auto import Chooser
    from .costmodel import Candidate, worker_counts

    spec, hosts = result.spec, list(result.spec.deploy.hosts)
    settings = request.deployment.settings
    # agent-groups validates only with several agent groups, on 1 + their number of workers; a
    # switch to it and back resumes across the two kinds of checkpoint (rlgen.runtime.checkpoints)
    candidates = [
        (policy, workers)
        for workers in worker_counts(hosts, local_cores(), spec.deploy.workers)
        for policy in (p for p in POLICIES if p != "single")
        if validate_file(request.target, policy=policy, workers=workers, hosts=hosts, settings=settings).ok
    ]
    devices = auto_placements(spec.deploy.devices, gpu_visible())  # the CPU's, and the GPU's where one serves
    extra = request.deployment.setting_argv()
    if len(devices) == 1 and request.deployment.devices is not None:  # runs placed as this one
        extra += ["--devices", flag_text(request.deployment.devices)]
    chooser = Chooser(
        Path(request.target),
        candidates,
        spec.train.total_steps,
        0,  # env calls and gradient steps per iteration are set from the single build's plan
        0,
        run_dir=Path(),
        hosts=hosts,
        model=spec,
        budget_s=request.calibration_budget,
        extra=extra,
        note=(lambda line: None) if request.quiet else note,
        devices=devices,
    )
    recalled = not request.recalibrate and chooser.recall(_history(resolved(spec), spec.deploy.hosts))
    where = chooser.choice if recalled else Candidate("single", 1, devices=chooser.base)
    placed = _validated_under(request, chooser, where)
    return (placed, None, chooser) if recalled else (placed, chooser, None)


def _validated_under(request: RunRequest, auto: Any, c: Any) -> Any:
    """The spec validated under auto's candidate ``c``: its policy, workers and placement."""
    return validated(request.target, request.deployment.placed(c.policy, c.workers, auto.devices_of(c)))


def _run_auto(request: RunRequest, auto: Any, launch: _Launch, run: RunDir) -> None:
    """Start under single with the chooser as its profile hook; go on under its choice."""
    import json

    from .costmodel import PROFILE_ITERATIONS

    single = launch.info
    auto.run_dir = run
    auto.shape(json.loads((single.build_dir / "plan.json").read_text())["run"]["steps_per_iteration"])
    _launch(request, launch, run, None, profile=(PROFILE_ITERATIONS, auto.decide))
    choice = auto.choice
    profiled = auto.record.get("profile", {}).get("iterations", 0) if auto.record else 0
    if auto.stays:
        _remember(single, auto.hosts, run)
        return
    _remember(single, auto.hosts, run, slice(None, profiled))
    result = _validated_under(request, auto, choice)
    # a placement other than the profile's (a GPU) in the name too: single may be chosen on the GPU
    suffix = "-" + re.sub(r"[=,:]", "-", choice.devices) if choice.devices != auto.base else ""
    explicit = request.build_dir
    if explicit is not None:  # beside the one given, for the policy chosen
        explicit = explicit.with_name(f"{explicit.name}-{choice.policy}-{choice.workers}{suffix}")
    chosen = _info(_built(result, run, explicit, suffix))
    prepare_run_dir(run, chosen, resume=True)
    record_build(run, chosen)
    cluster = _cluster(request, chosen, {})
    trial = ["--trial", auto.trial_floor()] if auto.trial else []
    started = time.perf_counter()
    resumed = [*_resumed(request, launch.rank_args, profiled), *trial]
    run_distributed(chosen, horovod_command(chosen, cluster, resumed), run, request.quiet, cluster)
    rows = _rows(run)
    _remember(chosen, cluster.hosts, run, slice(profiled, None))
    if auto.trial:
        doc = run.read()
        kept = doc.get("status") != "switching"
        measured = doc.get("trial_steps_per_s")
        speed = (float(measured), str(doc.get("trial_measured_over", ""))) if measured else None
        auto.tried(speed, kept, time.perf_counter() - started)
        if not kept:  # slower than single: single goes on from the tried policy's last checkpoint
            prepare_run_dir(run, single, resume=True)
            record_build(run, single)
            done = rows[-1]["iteration"] if rows else profiled
            if not request.iterations or request.iterations > done:
                run_in_process(single, _resumed(request, launch.rank_args, done), run, verbose=request.verbose)
            _remember(single, auto.hosts, run, slice(len(rows), None))


def _rows(run: RunDir) -> list[dict[str, Any]]:
    from rlgen.runtime.metricslog import read_metrics

    return read_metrics(run.path)


def _resumed(request: RunRequest, rank_args: list[str], done: int) -> list[str]:
    """The rank arguments that resume the run after ``done`` iterations (``--iterations``
    counts from the run's start)."""
    out = [a for a in rank_args if a != "--resume"] + ["--resume"]
    if request.iterations:
        out[out.index("--iterations") + 1] = str(max(request.iterations - done, 0))
    return out
