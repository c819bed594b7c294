"""Starting a build's ranks: in this process (``single``) or under ``horovodrun --gloo``.

The launcher never imports TensorFlow itself for distributed runs. It starts the
generated rank entry (``python -m <package>.main``) on every rank under horovodrun,
with the ranks' own output going to ``ranks/launch.log`` in the run directory, and
keeps one :mod:`lifeline <rlgen.runtime.lifeline>` connection to every rank
(:mod:`.watch`):

* it draws rank 0's progress;
* Ctrl-C or SIGTERM asks every rank to stop cleanly (final checkpoint); a second one aborts;
* the first rank that fails or dies is the cause: the launcher names it (rank, host,
  reason), tells the others to abort, and ends the job within seconds;
* if the launcher itself is killed, the ranks notice and stop.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgen.runtime.rundir import RunDir

from .hosts import Cluster, HostError, lifeline_bind, preflight
from .watch import STOPS, Job


class LaunchError(Exception):
    """A run that could not start or did not finish: the message says which rank and why."""


class Aborted(LaunchError):
    """A second Ctrl-C or SIGTERM ended the job before its ranks stopped cleanly."""


@dataclass(frozen=True)
class BuildInfo:
    """What the launcher needs from a build directory (read from plan.json)."""

    build_dir: Path
    package: str
    name: str
    policy: str
    workers: int
    ranks: tuple[dict, ...]
    run_root: str = "runs"
    hosts: tuple[str, ...] = ()
    devices: dict[str, str] | None = None  # fragment -> device asked for (plan.json), None: all on the CPU

    @classmethod
    def read(cls, build_dir: Path) -> BuildInfo:
        plan_path = build_dir / "plan.json"
        if not plan_path.is_file():
            raise LaunchError(f"{build_dir} is not an rlgen build directory (no plan.json); run `rlgen build` first")
        plan = json.loads(plan_path.read_text())
        packages = [p.parent.name for p in build_dir.glob("*/main.py")]
        if len(packages) != 1:
            raise LaunchError(f"{build_dir} should hold exactly one generated package with a main.py")
        spec = json.loads((build_dir / "spec.resolved.json").read_text())
        return cls(
            build_dir,
            packages[0],
            spec["name"],
            plan["meta"]["policy"],
            int(plan["meta"]["workers"]),
            tuple(plan["ranks"]),
            spec.get("train", {}).get("run_dir", "runs"),
            tuple(spec.get("deploy", {}).get("hosts", ())),
            {f["name"]: f.get("device") or "cpu" for f in plan["fragments"]}
            if any(f.get("device") for f in plan["fragments"])
            else None,
        )


def horovod_command(info: BuildInfo, cluster: Cluster, rank_args: list[str]) -> list[str]:
    """``horovodrun --gloo -np N -H hosts [ssh/interface options] python -m <package>.main ...``,
    through :mod:`rlgen.launch.hvdrun` (horovodrun itself, less its 4-second Gloo check)."""
    cmd = [sys.executable, "-m", "rlgen.launch.hvdrun", "--gloo", *cluster.horovodrun_args(info.workers)]
    return [*cmd, sys.executable, "-m", f"{info.package}.main", *rank_args]


def describe(info: BuildInfo, cmd: list[str] | None) -> str:
    lines = [f"policy {info.policy}, {info.workers} worker(s), build {info.build_dir}"]
    for r in info.ranks:
        frags = r["fragments"] if info.devices is None else [f"{f} on {info.devices[f]}" for f in r["fragments"]]
        lines.append(
            f"  rank {r['rank']} ({r.get('host', 'localhost')}): role {r['role']}, fragments {', '.join(frags)}"
        )
    lines.append("command: " + (shlex.join(cmd) if cmd else f"(in this process) python -m {info.package}.main"))
    return "\n".join(lines)


def record_build(run_dir: RunDir, info: BuildInfo) -> None:
    """Point ``run.json`` at the build the run goes on with (``--policy auto`` switched to it),
    so that a later ``--resume`` runs that build."""
    run_dir.update(build_dir=str(info.build_dir.resolve()), policy=info.policy, workers=info.workers)
    for name in ("spec.resolved.json", "plan.json"):
        shutil.copyfile(info.build_dir / name, run_dir.path / name)


def prepare_run_dir(run_dir: RunDir, info: BuildInfo, resume: bool) -> None:
    """Create the run directory with the resolved spec and the plan (or check it, on resume).

    Per-launch state (``ranks/``: pids, errors, logs of the previous launch) is cleared, so a
    resumed run never mistakes the failure it recovers from for a new one.
    """
    if resume:
        if not run_dir.is_run():
            raise LaunchError(f"--resume: {run_dir.path} is not a run directory (no run.json)")
        if not os.access(run_dir.path, os.W_OK):
            raise LaunchError(f"run directory {run_dir.path} is not writable")
        shutil.rmtree(run_dir.ranks, ignore_errors=True)
        run_dir.update(drop=("error",))  # the failure this launch recovers from
        return
    if not run_dir.fresh():
        raise LaunchError(f"run directory {run_dir.path} exists and is not empty; choose another or use --resume")
    try:
        run_dir.path.mkdir(parents=True, exist_ok=True)
        for name in ("spec.resolved.json", "plan.json"):
            shutil.copyfile(info.build_dir / name, run_dir.path / name)
        run_dir.update(
            name=info.name,
            status="starting",
            build_dir=str(info.build_dir.resolve()),
            policy=info.policy,
            workers=info.workers,
        )
    except OSError as exc:
        raise LaunchError(f"cannot write the run directory {run_dir.path}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def quiet_stderr(log: Path, verbose: bool) -> Iterator[None]:
    """Send file descriptor 2 (TensorFlow's C++ logs, Python warnings) to ``log`` unless ``verbose``."""
    if verbose:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def run_in_process(
    info: BuildInfo, rank_args: list[str], run_dir: RunDir, verbose: bool = False, profile: Any = None
) -> None:
    """Run a single-process build here (imports TensorFlow). ``profile``: ``--policy auto``'s
    (:mod:`rlgen.runtime.trial`), handed to the rank as a value."""
    from rlgen.runtime.failures import failure_reason
    from rlgen.runtime.tfimport import TF_LOG_ENV

    log = run_dir.launch_log
    if verbose:  # TensorFlow's native lines where they are written, the import's too
        os.environ["RLGEN_TF_VERBOSE"] = "1"
    else:
        os.environ.setdefault(TF_LOG_ENV, str(log.resolve()))
    build = str(info.build_dir.resolve())
    sys.path.insert(0, build)
    try:
        with quiet_stderr(log, verbose):
            for mod in [m for m in sys.modules if m == info.package or m.startswith(info.package + ".")]:
                del sys.modules[mod]
            main = importlib.import_module(f"{info.package}.main")
            from rlgen.runtime.rank import run_rank

            # what the generated main() does, with the profile passed as a value
            devices = getattr(main, "DEVICES", None)
            run_rank(
                main.RUN, main.ROLES, main.RUNNERS, rank_args, description=info.name, profile=profile, devices=devices
            )
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the rank recorded it in ranks/0.error; report it in one line
        error = run_dir.rank_file(0, "error")
        if error.is_file():
            message = f"training failed: {error.read_text().splitlines()[0]} (details: {error})"
        elif run_dir.rank_file(0, "pid").is_file():  # the session started, and could not write its error
            message = f"training failed: {failure_reason(exc)} (run directory {run_dir.path})"
        else:
            message = (
                f"the build's code failed before training started: {failure_reason(exc)} "
                f"(build {info.build_dir}; RLGEN_DEBUG=1 shows the traceback)"
            )
        mark_failed(run_dir, message)
        raise LaunchError(message) from exc
    finally:
        sys.path.remove(build)


def run_distributed(
    info: BuildInfo, cmd: list[str], run_dir: RunDir, quiet: bool = False, cluster: Cluster | None = None
) -> None:
    """Run the ranks under horovodrun and watch them through the lifeline (:mod:`.watch`).
    A job that spans hosts is checked first (:func:`rlgen.launch.hosts.preflight`)."""
    cluster = cluster or Cluster(info.hosts)
    try:
        bind = lifeline_bind(cluster, preflight(cluster, info.workers, info.build_dir, run_dir.path))
    except HostError as exc:
        mark_failed(run_dir, str(exc))
        raise LaunchError(str(exc)) from None
    if cluster.remote():
        run_dir.update(cluster=cluster.record())
    job = Job(info, cmd, run_dir, quiet, cluster, bind)
    # Ctrl-C (SIGINT) and SIGTERM stop the run cleanly, even where it started with SIGINT ignored
    # (a background job of a non-interactive shell), as under `single`, whose session does the same
    previous = {sig: signal.signal(sig, job.on_signal) for sig in STOPS}
    try:
        code = job.watch()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        job.close()
    message = job.report(code)
    if message is not None:
        mark_failed(run_dir, message)
        raise (Aborted if job.aborted else LaunchError)(message)


def mark_failed(run_dir: RunDir, message: str) -> None:
    """``run.json`` says ``failed`` with the launcher's message (rank 0 may not have lived to say it)."""
    with contextlib.suppress(OSError, ValueError):
        run_dir.update(status="failed", error=message)
