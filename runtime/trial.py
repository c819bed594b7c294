"""``--policy auto``'s rank-side half: rank 0 profiles the run's first iterations, or measures a
policy the run tries (see :mod:`rlgen.app.auto` for the chooser).

* A **profile** ``(K, hook)`` (a run that starts under ``single`` in the launcher's process):
  from K iterations on, rank 0 hands the records so far to ``hook(records, last)`` after each
  iteration until it answers: True ends the run there with a checkpoint, for another policy to
  resume ("switch"), False goes on, None asks for more.
* A **trial** ``(floor, K, seconds)`` (``--trial FLOOR:K:SECONDS`` on a tried policy's ranks):
  rank 0 measures the policy's speed over at least K iterations and the given seconds after
  this launch's first :data:`TRIAL_WARMUP` (tracing, warm-up) and, below ``floor`` steps/s,
  stops every rank with a checkpoint ("switch") for the run to go on under single.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Iterations of a launch a trial leaves out before it measures: the first traces and compiles,
#: and in the second the other ranks may still be tracing theirs.
TRIAL_WARMUP = 2

Hook = Callable[[list[dict[str, Any]], bool], "bool | None"]
Profile = tuple[int, Hook]


def parse_trial(value: str | None) -> tuple[float, int, float] | None:
    """``FLOOR:K:SECONDS`` (the rank argument ``--trial``) as numbers; None for none."""
    if not value:
        return None
    floor, iterations, seconds = value.split(":")
    return float(floor), int(iterations), float(seconds)


class Trial:
    """Rank 0's profile or trial (both optional; see the module docstring)."""

    def __init__(self, profile: Profile | None = None, trial: tuple[float, int, float] | None = None) -> None:
        self._profile = profile
        self._profiled: list[dict[str, Any]] = []
        self._trial = trial
        self._seen = 0  # iterations of this launch, while a trial measures
        self._mark = (0, 0.0)  # env steps and elapsed time where its measurement starts
        #: the tried policy's measured env steps/s, once measured (run.json ``trial_steps_per_s``),
        #: and over what (``trial_measured_over``)
        self.speed: float | None = None
        self.measured_over = ""

    def verdict(self, env_steps: int, elapsed: float) -> str:
        """``switch`` when a tried policy measured slower than its floor, else ""."""
        if self._trial is None:
            return ""
        floor, iterations, seconds = self._trial
        self._seen += 1
        if self._seen == TRIAL_WARMUP:  # measured from the end of this launch's second iteration
            self._mark = (env_steps, elapsed)
        steps, since = self._mark
        span = elapsed - since
        if self._seen < TRIAL_WARMUP + max(iterations, 1) or span < seconds:
            return ""
        self._trial = None
        self.speed = (env_steps - steps) / span
        self.measured_over = f"{self._seen - TRIAL_WARMUP} iterations, {span:.1f} s"
        return "switch" if self.speed < floor else ""

    def end(self, env_steps: int, elapsed: float) -> None:
        """The run ends with a trial still measuring: its speed over the iterations it saw after
        its warm-up, if it saw any (``measured_over`` says how few); else it stays unmeasured."""
        if self._trial is None or self._seen <= TRIAL_WARMUP:
            return
        steps, since = self._mark
        span = elapsed - since
        if span > 0 and env_steps > steps:
            self.speed = (env_steps - steps) / span
            self.measured_over = f"{self._seen - TRIAL_WARMUP} iterations, {span:.1f} s (the run ended first)"
        self._trial = None

    def profiled(self, record: dict[str, Any], last: bool) -> bool:
        """Hand this iteration's record to the profile; True when it ends the run here."""
        if self._profile is None:
            return False
        self._profiled.append(record)
        if len(self._profiled) < self._profile[0]:
            return False
        answer = self._profile[1](self._profiled, last)
        if answer is None:  # profile on
            return False
        self._profile = None
        return bool(answer)
