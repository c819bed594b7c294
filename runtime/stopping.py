"""How a rank is asked to stop before its budget: Ctrl-C (SIGINT), SIGTERM (what Slurm,
Kubernetes and ``docker stop`` send) or the launcher (over the lifeline, or gone). The first
ask stops the run cleanly at the end of the iteration, with a final checkpoint; a second signal
aborts (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

#: What each stopping signal is called in run.json and on the terminal.
STOP_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class StopRequests:
    """The reason this rank was asked to stop ("" while none), and the signal handlers that
    ask (installed from the main thread; :meth:`close` puts the previous ones back).
    ``note`` tells the user, on rank 0."""

    def __init__(self, note: Callable[[str], None] | None = None) -> None:
        self.reason = ""
        self._note = note
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}

    def __bool__(self) -> bool:
        return bool(self.reason)

    def ask(self, reason: str) -> None:
        """Stop at the end of this iteration (thread-safe; the first reason is kept)."""
        if self.reason:
            return
        self.reason = reason
        if self._note is not None and reason in STOP_SIGNALS.values():
            again = "Ctrl-C" if reason == "interrupted" else "a second signal"
            self._note(f"{reason}: finishing this iteration and writing a checkpoint ({again} to abort)")

    def close(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.reason in STOP_SIGNALS.values():  # a second one: stop now
            self.close()
            raise KeyboardInterrupt
        self.ask(STOP_SIGNALS[signal.Signals(signum)])
