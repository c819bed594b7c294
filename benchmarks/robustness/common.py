"""What the sections share: the paths and limits, the report of figures and failed properties,
the printed tables, and the processes they start (``rlgen`` through the installed command, a
command measured for its time and peak RSS, and what a run leaves behind)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RLGEN = Path(sys.executable).with_name("rlgen")  # the installed console script, as a user runs it
GNU_TIME = Path("/usr/bin/time")  # its %M: a command's peak RSS
PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"
SLOW_S = 5.0  # a validation, or a hostile file, taking longer is flagged
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # raw control characters a terminal would act on


@dataclass
class Report:
    """The figures and the failed properties of the whole pass."""

    figures: list[tuple[str, object]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def figure(self, name: str, value: object) -> None:
        self.figures.append((name, value))

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failed.append(what)
        return ok


def yes(flag: bool | None) -> str:
    return "n/a" if flag is None else ("yes" if flag else "no")


def line_of(text: str, width: int = 100) -> str:
    """The first non-empty line of ``text``, control characters shown escaped, cut to ``width``."""
    first = next((s.strip() for s in text.splitlines() if s.strip()), "")
    shown = CONTROL.sub(lambda m: ascii(m.group())[1:-1], first)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def table(headers: list[str], rows: list[list[object]]) -> None:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def child_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "RLGEN_CACHE_DIR": str(cache)}


@dataclass
class Measured:
    code: int | None  # None: killed at the timeout
    out: str
    seconds: float
    rss_mb: float


def measured(cmd: list[str], cwd: Path, env: dict, timeout: float, stdin: Path | None = None) -> Measured:
    """Run ``cmd``: its exit code, output (stderr first), wall seconds and peak RSS. The RSS is
    GNU time's ``%M`` where /usr/bin/time is installed: ``os.wait4``'s figure for a child of this
    process counts this process's own size too (a forked child's memory before its exec)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile() as rss:
        wrapped = [str(GNU_TIME), "-f", "%M", "-o", rss.name, *cmd] if GNU_TIME.exists() else cmd
        with open(stdin or os.devnull, "rb") as feed:
            start = time.perf_counter()
            proc = subprocess.Popen(
                wrapped, cwd=cwd, env=env, stdin=feed, stdout=out, stderr=err, start_new_session=True
            )
        code, usage = None, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() - start > timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, _, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        proc.returncode = code if code is not None else -9  # reaped here: Popen must not wait for it
        err.seek(0)
        out.seek(0)
        text = err.read().decode("utf-8", "replace") + out.read().decode("utf-8", "replace")
        peak = usage.ru_maxrss / 1024
        if GNU_TIME.exists():
            said = Path(rss.name).read_text().split()
            peak = int(said[-1]) / 1024 if said and said[-1].isdigit() else float("nan")
    return Measured(code, text, seconds, peak)


class Run:
    """One ``rlgen run`` through the installed command, in its own session (as a shell starts a
    job), its output in files."""

    def __init__(self, args: list[str], cwd: Path, env: dict, name: str) -> None:
        self.out_path, self.err_path = cwd / f"{name}.out", cwd / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [str(RLGEN), "run", *map(str, args)], cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True
            )

    @property
    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def ctrl_c(self) -> None:
        """SIGINT to the process group, as a terminal's Ctrl-C sends it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float) -> int | None:
        """The exit code, or None if it had not ended in ``timeout`` seconds (it is then killed)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None


def rlgen_now(args: list, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            [str(RLGEN), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def metrics(run_dir: Path) -> tuple[list[dict], bool]:
    """The metrics rows, and whether every line is a whole row."""
    rows, whole = [], True
    with contextlib.suppress(OSError):
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                whole = False
    return rows, whole


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_for(run: Run, ready: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.proc.poll() is None:
        if ready():
            return True
        time.sleep(0.1)
    return ready() and run.proc.poll() is None


def processes_of(run_dir: Path, plotter: bool = False) -> list[int]:
    """pids of processes whose command line names ``run_dir`` (the launcher, its wrappers, the
    ranks; with ``plotter``, also the detached ``rlgen plot`` that draws a finished run's
    curves.png): all started by this script."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(run_dir).encode() in b" ".join(argv) and (plotter or b"plot" not in argv):
                found.append(int(pid))
    return found


def reap(run_dir: Path) -> None:
    """SIGKILL what is left of a run this script started, one pid at a time."""
    for pid in processes_of(run_dir, plotter=True):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
