"""Progress in the terminal: one live status line on a TTY, plain periodic lines otherwise."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory where it is below it."""
    with contextlib.suppress(ValueError, OSError):
        return str(Path(path).resolve().relative_to(Path.cwd()))
    return str(path)


def _num(value: Any, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


class Progress:
    """Shows env steps, steps/s, mean return and ETA.

    On a terminal the line is redrawn at most 5 times a second; when stdout is a
    file or pipe, a plain line is printed at most every ``plain_every`` seconds. Rates
    and the ETA leave out the first iteration (it traces and compiles). ``final_line``:
    the closing ``done …`` line shows even when the rest is off (``--quiet``).
    """

    def __init__(
        self,
        total_steps: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        plain_every: float = 5.0,
        final_line: bool = True,
    ) -> None:
        self.total = total_steps
        self.enabled = enabled
        self.final_line = final_line
        self._first: tuple[int, float] | None = None  # env steps and time at the end of the first iteration
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.plain_every = plain_every
        self._last = -math.inf  # the first line always shows, whatever the monotonic clock reads
        self._width = 0

    def line(self, record: Mapping[str, Any]) -> str:
        steps, elapsed = record.get("env_steps", 0), record.get("time") or 0.0
        if self._first is None or steps < self._first[0]:
            self._first = (steps, elapsed)
        rate = None
        if steps > self._first[0] and elapsed > self._first[1]:
            rate = (steps - self._first[0]) / (elapsed - self._first[1])
        eta = (self.total - steps) / rate if rate else None
        text = (
            f"{steps:>9,}/{self.total:,} env steps  {_num(rate, '{:,.0f}')} steps/s  "
            f"return {_num(record.get('mean_return'))}"
        )
        if record.get("eval_mean_return") is not None:
            text += f"  eval {record['eval_mean_return']:.1f}"
        return text + f"  elapsed {_duration(elapsed)}  ETA {_duration(eta) if eta is not None else '-'}"

    def update(self, record: Mapping[str, Any], final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if final or now - self._last >= 0.2:
                text = self.line(record)
                self.stream.write("\r" + text.ljust(self._width))
                self._width = len(text)
                self.stream.flush()
                self._last = now
        elif final or now - self._last >= self.plain_every:
            self.stream.write(self.line(record) + "\n")
            self.stream.flush()
            self._last = now

    def note(self, message: str) -> None:
        if not self.enabled:
            return
        if self.tty and self._width:
            self.stream.write("\n")
            self._width = 0
        self.stream.write(message + "\n")
        self.stream.flush()

    def finish(self, summary: Mapping[str, Any]) -> None:
        if not (self.enabled or self.final_line):
            return
        if self.tty and self._width:
            self.stream.write("\n")
        ret = summary.get("mean_return")
        final = summary.get("final_eval") or {}
        evaluated = f", final eval {final['mean_return']:.1f}" if final.get("mean_return") is not None else ""
        built = summary.get("build_dir")
        built = f" (build {_shown_path(built)})" if built else ""
        self.stream.write(
            f"done ({summary.get('stop_reason')}): {summary.get('env_steps'):,} env steps in "
            f"{summary.get('elapsed', 0):.1f} s, mean return {_num(ret)}{evaluated}; "
            f"run directory {summary.get('run_dir')}{built}\n"
        )
        self.stream.flush()


class RemoteProgress:
    """:class:`Progress` for a rank started by ``rlgen run``: records go over the lifeline and
    the launcher draws them (so the rank's own output can go to a log file)."""

    def __init__(self, lifeline, total_steps: int) -> None:
        self.lifeline, self.total = lifeline, total_steps

    def update(self, record: Mapping[str, Any], final: bool = False) -> None:
        self.lifeline.send("progress", record=dict(record), total=self.total, final=final)

    def note(self, message: str) -> None:
        self.lifeline.send("note", text=message)

    def finish(self, summary: Mapping[str, Any]) -> None:
        self.lifeline.send("summary", summary=dict(summary))
