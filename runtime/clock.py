"""Where a rank's time goes: the parts of an iteration, and the clock that charges them.

Tools that read a run's rows (bench, auto's history, plot) import :data:`CATEGORIES` from here,
not from the session."""

from __future__ import annotations

import time
from collections.abc import Sequence

#: The parts a run times. loop: a whole iteration compiled into one call (single policy, in-graph
#: env); other: logs, checkpoints, evaluation.
CATEGORIES = ("inference", "env", "buffer", "update", "comm", "loop", "other")


class Clock:
    """Charges wall time to categories: ``lap(c)`` adds the time since the previous lap to ``c``."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(CATEGORIES, 0.0)
        self._last = time.perf_counter()

    def lap(self, category: str) -> None:
        now = time.perf_counter()
        self.totals[category] += now - self._last
        self._last = now

    def collect(self) -> dict[str, float]:
        """The totals so far, and start new ones (the running lap goes on)."""
        out, self.totals = self.totals, dict.fromkeys(CATEGORIES, 0.0)
        return out

    def reset(self) -> dict[str, float]:
        """Like :meth:`collect`, and the next lap starts now."""
        self._last = time.perf_counter()
        return self.collect()


def part_fields(times: dict[str, float], rest: Sequence[float] | None = None) -> dict[str, float]:
    """A metrics row's time per part: this rank's (``time_*``) and, where the other ranks
    reported theirs (mean per rank, in :data:`CATEGORIES` order), theirs (``rest_time_*``)."""
    out = {f"time_{k}": round(v, 5) for k, v in times.items()}
    if rest is not None:
        out.update({f"rest_time_{k}": round(float(v), 5) for k, v in zip(CATEGORIES, rest, strict=True)})
    return out
