"""The one way rlgen starts ``rlgen`` children (``rlgen run`` for bench rows, auto's
measurements and tune's trials; the detached ``rlgen plot`` of a finished run): the same
interpreter, ``-m rlgen``, and the caller's environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO


def command(*args: str) -> list[str]:
    """``python -m rlgen ARGS`` with this interpreter."""
    return [sys.executable, "-m", "rlgen", *args]


def run(args: Sequence[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``rlgen ARGS`` to its end, its output captured (raises ``subprocess.TimeoutExpired``)."""
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout)


def start(
    args: Sequence[str],
    output: IO[bytes] | int = subprocess.DEVNULL,
    errors: IO[bytes] | int | None = None,
    own_session: bool = True,
    before: Callable[[], None] | None = None,
) -> subprocess.Popen:
    """Start ``rlgen ARGS`` and return at once: its stdout to ``output``, its stderr to
    ``errors`` (default: with stdout), no stdin; ``own_session``: Ctrl-C in the terminal does
    not reach it; ``before`` runs in the child before ``rlgen`` starts."""
    return subprocess.Popen(
        command(*args),
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output if errors is None else errors,
        start_new_session=own_session,
        preexec_fn=before,  # noqa: PLW1509 - the callers run no threads of their own
    )


def draw_curves(run_dir: Path, out: Path, log: Path) -> None:
    """``out`` (the run's ``curves.png``) drawn by a detached ``rlgen plot``, so that the run's
    command returns without waiting for matplotlib; a failure to draw lands in ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err:
        start(["plot", str(run_dir), "-o", str(out)], errors=err)


def drawn(out: Path, timeout: float = 60.0) -> bool:
    """Wait until :func:`draw_curves` has written ``out``, at most ``timeout`` seconds (at once
    without matplotlib: nothing is drawn); whether it was. For a caller that removes the run
    directory next, or times the next run."""
    import importlib.util
    import time

    if importlib.util.find_spec("matplotlib") is None:
        return False
    deadline = time.monotonic() + timeout
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return out.exists()
