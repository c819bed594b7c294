"""Watching a horovodrun job through the lifeline (:mod:`rlgen.runtime.lifeline`).

The launcher draws rank 0's progress; Ctrl-C or SIGTERM asks every rank to stop cleanly (final
checkpoint) and a second one aborts; the first rank that fails or dies is the cause: it is named
(rank, host, reason), the others are told to abort, and the job ends within seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from rlgen.runtime.lifeline import LOST_BEATS, Switchboard
from rlgen.runtime.progress import Progress
from rlgen.runtime.rundir import RunDir

from .hosts import GLOO_TIMEOUT, Cluster

#: Seconds the other ranks get to end after one failed, before the job is terminated.
FAILURE_GRACE = 5.0
#: Seconds a rank's report that it lost a peer waits for that peer's own report (which names
#: the rank that failed first) before it is taken as the cause.
SECONDARY_WAIT = 2.0
#: Seconds all ranks get to connect to the launcher once horovodrun started them.
START_TIMEOUT = 300.0
#: Seconds between lifeline beats on a job that spans hosts (see rlgen.runtime.lifeline).
BEAT_S = 2.0
#: Seconds a rank of a one-host job still running after horovodrun ended gets to end (a rank
#: told to stop finishes its iteration and writes a checkpoint) before it is killed.
RANK_EXIT_S = 10.0
#: What a stopping signal is called, and what the ranks are told.
STOPS = {signal.SIGINT: ("interrupted", "interrupt", "Ctrl-C"), signal.SIGTERM: ("terminated", "terminate", "SIGTERM")}


class Job:
    """One horovodrun job watched through the lifeline. ``info`` is the build's
    :class:`~rlgen.launch.job.BuildInfo`."""

    def __init__(self, info, cmd: list[str], run_dir: RunDir, quiet: bool, cluster: Cluster, bind: str) -> None:  # noqa: ANN001
        self.info, self.run_dir = info, run_dir
        self.rank_hosts = cluster.rank_hosts(info.workers)
        self.spans_hosts = bool(cluster.remote())
        self.board = Switchboard(bind, beat=BEAT_S if self.spans_hosts else 0.0)
        self.log_path = run_dir.launch_log
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
        self.interrupts = 0  # stopping signals acted on
        self.signals: list[int] = []  # stopping signals received (on_signal): acted on between polls
        self.aborted = False  # a second signal ended the job

    def watch(self) -> int:
        started = time.monotonic()
        while True:
            events = self.board.poll(0.2)  # a signal meanwhile is counted by on_signal
            while self.interrupts < len(self.signals):
                self._interrupt(self.signals[self.interrupts])
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

    def on_signal(self, signum: int, frame: object) -> None:
        """SIGINT's and SIGTERM's handler while watching: counted here, acted on by :meth:`watch`
        between polls. Raising KeyboardInterrupt instead could land anywhere in the loop (handling
        an event, reading the last ones): the launcher left before the ranks' clean stop."""
        self.signals.append(signum)

    def _handle(self, event) -> None:
        where = self._where(event.rank)
        if event.kind == "hello" and len(self.board.ranks) == self.info.workers:
            # where each rank runs, as it says itself (hostname, pid)
            placed = {str(r): {"host": st.host, "pid": st.pid} for r, st in sorted(self.board.ranks.items())}
            with contextlib.suppress(OSError, ValueError):
                self.run_dir.update(ranks=placed)
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

    def _interrupt(self, signum: int) -> None:
        self.interrupts += 1
        said, told, name = STOPS[signal.Signals(signum)]
        if self.interrupts == 1:
            self.progress.note(
                f"{said}: the ranks finish this iteration and write a checkpoint ({name} again to abort)"
            )
            self.board.tell(told)
        else:
            self.aborted = True
            self.cause = self.cause or f"aborted by a second {name}"
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
        self._reap_ranks()
        self.board.close()

    def _reap_ranks(self) -> None:
        """Return only when no rank of a one-host job runs any more: horovodrun can end while a
        rank it told to stop still finishes its iteration and writes a checkpoint, and a
        ``--resume`` started then would race it for the run directory. A rank still running
        after :data:`RANK_EXIT_S` is killed (a checkpoint cut short is passed over on resume)."""
        if self.spans_hosts:
            return  # a pid names a process on its own host only; horovodrun ends remote ranks
        pids = [s.pid for s in self.board.ranks.values() if s.pid > 0]
        deadline = time.monotonic() + RANK_EXIT_S
        while (running := [p for p in pids if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, ended but not yet reaped by its parent, does not)."""
    import psutil  # a dependency of Horovod

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
