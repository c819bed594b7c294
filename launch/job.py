"""Starting a build's ranks: in this process (``single``) or under ``horovodrun --gloo``.

The launcher never imports TensorFlow itself for distributed runs. It starts the
generated rank entry (``python -m <package>.main``) on every rank under horovodrun,
with the ranks' own output going to ``ranks/launch.log`` in the run directory, and
keeps one :mod:`lifeline <rlgen.runtime.lifeline>` connection to every rank:

* it draws rank 0's progress;
* Ctrl-C asks every rank to stop cleanly (final checkpoint, exit 0); a second one aborts;
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
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .hosts import GLOO_TIMEOUT, Cluster, HostError, lifeline_bind, preflight
from .lifeline import LOST_BEATS, Switchboard
from .progress import Progress

#: Seconds the other ranks get to end after one failed, before the job is terminated.
FAILURE_GRACE = 5.0
#: Seconds a rank's report that it lost a peer waits for that peer's own report (which names
#: the rank that failed first) before it is taken as the cause.
SECONDARY_WAIT = 2.0
#: Seconds all ranks get to connect to the launcher once horovodrun started them.
START_TIMEOUT = 300.0
#: Seconds between lifeline beats on a job that spans hosts (see rlgen.runtime.lifeline).
BEAT_S = 2.0


class LaunchError(Exception):
    """A run that could not start or did not finish: the message says which rank and why."""


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
        )


def horovod_command(info: BuildInfo, cluster: Cluster, rank_args: list[str]) -> list[str]:
    """``horovodrun --gloo -np N -H hosts [ssh/interface options] python -m <package>.main ...``,
    through :mod:`rlgen.runtime.hvdrun` (horovodrun itself, less its 4-second Gloo check)."""
    cmd = [sys.executable, "-m", "rlgen.runtime.hvdrun", "--gloo", *cluster.horovodrun_args(info.workers)]
    return [*cmd, sys.executable, "-m", f"{info.package}.main", *rank_args]


def describe(info: BuildInfo, cmd: list[str] | None) -> str:
    lines = [f"policy {info.policy}, {info.workers} worker(s), build {info.build_dir}"]
    for r in info.ranks:
        lines.append(
            f"  rank {r['rank']} ({r.get('host', 'localhost')}): role {r['role']}, "
            f"fragments {', '.join(r['fragments'])}"
        )
    lines.append("command: " + (shlex.join(cmd) if cmd else f"(in this process) python -m {info.package}.main"))
    return "\n".join(lines)


def update_run_json(run_dir: Path, drop: tuple[str, ...] = (), **fields) -> None:
    """Set ``fields`` in the run's ``run.json`` and remove the keys in ``drop`` (written
    whole, then moved into place)."""
    path = run_dir / "run.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.update(fields)
    for key in drop:
        doc.pop(key, None)
    tmp = path.with_name(".run.json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def record_build(run_dir: Path, info: BuildInfo) -> None:
    """Point ``run.json`` at the build the run goes on with (``--policy auto`` switched to it),
    so that a later ``--resume`` runs that build."""
    update_run_json(run_dir, build_dir=str(info.build_dir.resolve()), policy=info.policy, workers=info.workers)
    for name in ("spec.resolved.json", "plan.json"):
        shutil.copyfile(info.build_dir / name, run_dir / name)


def prepare_run_dir(run_dir: Path, info: BuildInfo, resume: bool) -> None:
    """Create the run directory with the resolved spec and the plan (or check it, on resume).

    Per-launch state (``ranks/``: pids, errors, logs of the previous launch) is cleared, so a
    resumed run never mistakes the failure it recovers from for a new one.
    """
    if resume:
        if not (run_dir / "run.json").is_file():
            raise LaunchError(f"--resume: {run_dir} is not a run directory (no run.json)")
        if not os.access(run_dir, os.W_OK):
            raise LaunchError(f"run directory {run_dir} is not writable")
        shutil.rmtree(run_dir / "ranks", ignore_errors=True)
        update_run_json(run_dir, drop=("error",))  # the failure this launch recovers from
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        raise LaunchError(f"run directory {run_dir} exists and is not empty; choose another or use --resume")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        for name in ("spec.resolved.json", "plan.json"):
            shutil.copyfile(info.build_dir / name, run_dir / name)
        doc = {
            "name": info.name,
            "status": "starting",
            "build_dir": str(info.build_dir.resolve()),
            "policy": info.policy,
            "workers": info.workers,
        }
        (run_dir / "run.json").write_text(json.dumps(doc, indent=2) + "\n")
    except OSError as exc:
        raise LaunchError(f"cannot write the run directory {run_dir}: {exc.strerror or exc}") from None


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


def run_in_process(info: BuildInfo, rank_args: list[str], run_dir: Path, verbose: bool = False) -> None:
    """Run a single-process build here (imports TensorFlow)."""
    from .tfimport import TF_LOG_ENV

    log = run_dir / "ranks" / "launch.log"
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
            main.main(rank_args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the rank recorded it in ranks/0.error; report it in one line
        error = run_dir / "ranks" / "0.error"
        if error.is_file():
            raise LaunchError(f"training failed: {error.read_text().splitlines()[0]} (details: {error})") from exc
        raise LaunchError(
            f"the build's code failed before training started: {type(exc).__name__}: {exc} "
            f"(build {info.build_dir}; RLGEN_DEBUG=1 shows the traceback)"
        ) from exc
    finally:
        sys.path.remove(build)


class _Job:
    """One horovodrun job watched through the lifeline."""

    def __init__(
        self, info: BuildInfo, cmd: list[str], run_dir: Path, quiet: bool, cluster: Cluster, bind: str
    ) -> None:
        self.info, self.run_dir = info, run_dir
        self.rank_hosts = cluster.rank_hosts(info.workers)
        self.spans_hosts = bool(cluster.remote())
        self.board = Switchboard(bind, beat=BEAT_S if self.spans_hosts else 0.0)
        self.log_path = run_dir / "ranks" / "launch.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # the build's package, then the directory rlgen runs from (where a spec's custom parts --
        # env factory, wrappers, networks, components -- are importable under `single`, as
        # `python -m` puts it on the path), then the user's own path
        path = [str(info.build_dir.resolve()), os.getcwd(), os.environ.get("PYTHONPATH", "")]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in path if p)),
            # what TensorFlow's import writes natively (rlgen.runtime.tfimport), beside the rest
            "RLGEN_TF_LOG": str(self.log_path.resolve()),
            "PYTHONUNBUFFERED": "1",
            # Horovod's background cycle bounds each collective's latency; 0.2 ms instead of its
            # default 1 ms measured 1.2-3x more steps/s for every distributed policy here (rlgen bench).
            "HOROVOD_CYCLE_TIME": os.environ.get("HOROVOD_CYCLE_TIME", "0.2"),
        }
        if self.spans_hosts:
            env["RLGEN_LIFELINE_BEAT"] = str(BEAT_S)
            # a rank whose peer's host is gone stops waiting after this (Horovod's default: 30 s)
            env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", str(GLOO_TIMEOUT))
        cmd = [*cmd, "--lifeline", self.board.address]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=info.build_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self.progress = Progress(0, enabled=not quiet)
        self.cause: str | None = None
        self.failed_at: float | None = None
        self.secondary: tuple[str, float] | None = None  # a consequence, waiting for its cause
        self.interrupts = 0  # Ctrl-Cs acted on
        self.signals = 0  # Ctrl-Cs received (on_sigint): acted on between polls, never mid-step

    def watch(self) -> int:
        started = time.monotonic()
        while True:
            events = self.board.poll(0.2)  # a Ctrl-C meanwhile is counted by on_sigint
            while self.interrupts < self.signals:
                self._interrupt()
            for event in events:
                self._handle(event)
            code = self.proc.poll()
            if code is not None:
                # read what the ranks said just before the end
                for event in self.board.poll(0.05):
                    self._handle(event)
                return code
            for rank in self.board.silent():
                self._fail(
                    f"rank {rank}{self._where(rank)} has not been heard from for {BEAT_S * LOST_BEATS:.0f} s "
                    "(its host is down or cut off from this one)"
                )
            if self.secondary is not None and time.monotonic() - self.secondary[1] > SECONDARY_WAIT:
                self._fail(self.secondary[0])
            if self.failed_at is not None and time.monotonic() - self.failed_at > FAILURE_GRACE:
                return self._terminate()
            if len(self.board.ranks) < self.info.workers and time.monotonic() - started > START_TIMEOUT:
                self.cause = self.cause or f"only {len(self.board.ranks)} of {self.info.workers} ranks started"
                return self._terminate()

    def on_sigint(self, signum: int, frame: object) -> None:
        """SIGINT's handler while watching: counted here, acted on by :meth:`watch` between polls.
        Raising KeyboardInterrupt instead could land anywhere in the loop (handling an event,
        reading the last ones): the launcher left before the ranks' clean stop, with status 130."""
        self.signals += 1

    def _handle(self, event) -> None:
        where = self._where(event.rank)
        if event.kind == "hello" and len(self.board.ranks) == self.info.workers:
            # where each rank runs, as it says itself (hostname, pid)
            placed = {str(r): {"host": st.host, "pid": st.pid} for r, st in sorted(self.board.ranks.items())}
            with contextlib.suppress(OSError, ValueError):
                update_run_json(self.run_dir, ranks=placed)
        if event.kind == "progress":
            self.progress.total = int(event.payload.get("total", 0))
            self.progress.update(event.payload.get("record", {}), final=bool(event.payload.get("final")))
        elif event.kind == "note":
            self.progress.note(str(event.payload.get("text", "")))
        elif event.kind == "summary":
            self.progress.finish(event.payload.get("summary", {}))
        elif event.kind == "error":
            cause = f"rank {event.rank}{where} failed: {event.payload.get('reason', 'unknown error')}"
            if not event.payload.get("secondary"):
                self._fail(cause)
            elif self.secondary is None:
                self.secondary = (cause, time.monotonic())
        elif event.kind == "died":
            self._fail(
                f"rank {event.rank}{where} died without reporting an error (killed by a signal or out of memory)"
            )

    def _where(self, rank: int) -> str:
        """`` on host H`` for a job that spans hosts ("" when every rank runs here)."""
        if not self.spans_hosts:
            return ""
        state = self.board.ranks.get(rank)
        named = state.host if state is not None and state.host else ""
        planned = self.rank_hosts[rank] if rank < len(self.rank_hosts) else ""
        return f" on host {planned}" + (f" ({named})" if named and named != planned else "")

    def _fail(self, cause: str) -> None:
        if self.cause is None:
            self.cause = cause
            self.failed_at = time.monotonic()
            self.board.tell("abort")

    def _interrupt(self) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            self.progress.note(
                "interrupted: the ranks finish this iteration and write a checkpoint (Ctrl-C again to abort)"
            )
            self.board.tell("interrupt")
        else:
            self.cause = self.cause or "aborted by a second Ctrl-C"
            self.board.tell("abort")
            self.failed_at = self.failed_at or time.monotonic() - FAILURE_GRACE

    def _terminate(self) -> int:
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                return self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.wait()

    def report(self, code: int) -> str | None:
        """The failure message, or None when every rank finished."""
        if self.cause is None and self.secondary is not None:
            self.cause = self.secondary[0]
        if self.cause is None and code == 0:
            return None
        if self.cause is None:
            missing = sorted(set(range(self.info.workers)) - set(self.board.ranks))
            if missing:
                where = "".join(self._where(r) for r in missing[:1])
                self.cause = f"rank(s) {', '.join(map(str, missing))}{where} never started: {self._log_hint(missing)}"
            else:
                self.cause = f"horovodrun exited with status {code}"
        stopped = [
            r for r, s in self.board.ranks.items() if s.ended != "done" and not self.cause.startswith(f"rank {r} ")
        ]
        others = f"; {len(stopped)} other rank(s) stopped with it" if stopped else ""
        return f"{self.cause}{others} (log: {self.log_path})"

    def _log_hint(self, ranks: list[int]) -> str:
        """The last line a rank (or horovodrun) wrote, from the job's log."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "no output"
        for rank in ranks:
            mine = [
                ln.split(":", 1)[1].strip() for ln in lines if ln.startswith((f"[{rank}]<stderr>", f"[{rank}]<stdout>"))
            ]
            mine = [ln for ln in mine if ln]
            if mine:
                return mine[-1]
        text = [ln.strip() for ln in lines if ln.strip()]
        return text[-1] if text else "no output"

    def close(self) -> None:
        self.board.close()


def run_distributed(
    info: BuildInfo, cmd: list[str], run_dir: Path, quiet: bool = False, cluster: Cluster | None = None
) -> None:
    """Run the ranks under horovodrun and watch them through the lifeline (see the module docstring).
    A job that spans hosts is checked first (:func:`rlgen.runtime.hosts.preflight`)."""
    cluster = cluster or Cluster(info.hosts)
    try:
        bind = lifeline_bind(cluster, preflight(cluster, info.workers, info.build_dir, run_dir))
    except HostError as exc:
        _mark_failed(run_dir, str(exc))
        raise LaunchError(str(exc)) from None
    if cluster.remote():
        update_run_json(run_dir, cluster=cluster.record())
    job = _Job(info, cmd, run_dir, quiet, cluster, bind)
    # Ctrl-C (SIGINT) stops the run cleanly even where it started with SIGINT ignored (a
    # background job of a non-interactive shell), as under `single`, whose session installs its own
    previous = signal.signal(signal.SIGINT, job.on_sigint)
    try:
        code = job.watch()
    finally:
        signal.signal(signal.SIGINT, previous)
        job.close()
    message = job.report(code)
    if message is not None:
        _mark_failed(run_dir, message)
        raise LaunchError(message)


def _mark_failed(run_dir: Path, message: str) -> None:
    """``run.json`` says ``failed`` with the launcher's message (rank 0 may not have lived to say it)."""
    with contextlib.suppress(OSError, ValueError):
        update_run_json(run_dir, status="failed", error=message)
