"""``rlgen run --policy auto``: choose the distribution policy for this spec on this machine.

The run starts under ``single`` in this process, and its first iterations are the profile
(they are training, so profiling costs nothing): time per part (inference, env, buffer,
update) and steps per iteration. A cost model turns the profile into a predicted steps/s
for every candidate (each policy the spec validates under, with 2 up to the machine's
cores + 1 workers, or the hosts' slots), and ranks them (:func:`ranked`).

The calibration stays within :data:`CALIBRATION_SHARE` of the run's expected length (the
spec's ``train.total_steps`` at the fastest predicted speed). If the candidate ranked first
is predicted at least :data:`TRY` times single's speed, switching to it pays back at that
speed, and one start fits that budget, the run goes on under it as a *trial*: its own first
iterations measure it, and below :data:`TRIAL_KEEP` of single's profiled speed the run comes
back to ``single`` (:meth:`Chooser.tried`). Otherwise the candidates predicted to beat what is
already measured are measured apart for a few iterations each (``rlgen run --calibrate``: no
evaluation, checkpoints or export), in ranked order, within the budget; the fastest measured
wins if switching to it (a checkpoint, then a fresh start under it) saves time over the rest
of the run, and ``single`` goes on otherwise. None of this changes the algorithm: every
candidate trains the same spec, and the run resumes from the checkpoint it left.

Where the spec leaves a side of ``deploy.devices`` on ``auto`` and this machine can serve a
GPU (:func:`rlgen.machine.gpu_visible`), every candidate comes in two placements
(:func:`rlgen.dsl.devices.auto_placements`): the ``auto`` sides on the CPU, and on the GPU
(``single`` too). The profile runs on the CPU, so the model predicts the CPU placements only:
a GPU placement's speed is unknown until measured. It is never tried unmeasured (no trial
runs while one is left to measure), and is measured apart like the close calls, in
:func:`rlgen.app.costmodel.calibration_order`: ``single`` on the GPU first, then each GPU
placement right after its CPU twin. Every run of this calibration is given its placement
(``--devices``), and the choice names it. Elsewhere there is one placement, the spec's.

When this machine has measured the spec before (:mod:`rlgen.app.history`: every
finished run keeps its speed), :meth:`Chooser.recall` decides before the run starts, from
those measurements, and the run starts straight under the choice.

The choice and the table (predicted and measured steps/s, ms per part) go to ``run.json``
under ``auto`` and to the terminal.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rlgen.codegen.policies import POLICIES
from rlgen.dsl.devices import flag_text, pinned
from rlgen.machine import local_cores
from rlgen.runtime.rundir import RunDir

from .costmodel import (
    CALIBRATION_SHARE,
    MEASURE_ITERATIONS,
    PROFILE_S,
    START_S,
    TRIAL_KEEP,
    TRIAL_S,
    TRY,
    Candidate,
    Profile,
    calibration_order,
    network_rtt,
    predict,
    profile_of,
    ranked,
    runs_note,
    table,
    traffic,
)
from .history import History, ran


class Chooser:
    """Decides, from the run's profile under ``single``, which policy the run goes on with."""

    def __init__(
        self,
        spec: Path,
        candidates: Sequence[tuple[str, int]],
        total_steps: int,
        env_calls: int,
        grad_steps: int,
        run_dir: Path,
        hosts: Sequence[str] = (),
        cores: int | None = None,
        note: Callable[[str], None] = print,
        measure: Callable[[Candidate], None] | None = None,
        model: Any = None,
        budget_s: float | None = None,
        extra: Sequence[str] = (),
        devices: Sequence[str] = ("",),
    ) -> None:
        self.spec, self.total_steps, self.run_dir, self.hosts = spec, total_steps, RunDir(run_dir), list(hosts)
        self.env_calls, self.grad_steps = env_calls, grad_steps
        self.obs_bytes = self.weight_bytes = 0  # what crosses a cut (costmodel.traffic), set by :meth:`shape`
        self.cores = cores or local_cores()
        # placements (rlgen.dsl.devices.auto_placements): the profile's first, predicted; the others unknown
        self.base, self.pinned = devices[0], len(devices) > 1  # pinned: every run is given its placement
        self.candidates = [Candidate(p, w, devices=self.base) for p, w in candidates]
        for other in devices[1:]:
            self.candidates += [Candidate(p, w, devices=other) for p, w in [("single", 1), *candidates]]
        self.note = note
        self.measure = measure or self._measure
        self.choice: Candidate | None = None
        self.trial = False  # the choice is tried unmeasured (see TRY)
        self.record: dict[str, Any] = {}
        self.budget_s = budget_s  # None: CALIBRATION_SHARE of the run's expected length
        self.model = model  # the validated spec (rlgen.dsl.spec.Spec), for :meth:`shape`
        self.extra = list(extra)  # the command line's --seed/--set: candidates run the same algorithm

    def shape(self, steps_per_iteration: int) -> None:
        """Env calls and gradient steps per iteration, from the spec and its iteration size, and
        the bytes its observations and weights take (:func:`rlgen.app.costmodel.traffic`)."""
        spec = self.model
        self.obs_bytes, self.weight_bytes = traffic(spec)
        self.env_calls = max(1, steps_per_iteration // spec.env.num_envs)
        self.grad_steps = 1
        for comp in spec.components.values():
            if comp.get("epochs") and comp.get("minibatch"):  # epochs of minibatches (ppo)
                self.grad_steps = comp.get("epochs") * max(1, steps_per_iteration // comp.get("minibatch"))

    def _traffic(self, profile: Profile, threads: int) -> Profile:
        """``profile`` with the spec's bytes (set by :meth:`shape`) and the threads its update ran on."""
        return replace(profile, obs_bytes=self.obs_bytes, weight_bytes=self.weight_bytes, threads=threads)

    def recall(self, history: History) -> bool:
        """Choose before the run starts, from what this machine measured for the spec before
        (:mod:`rlgen.app.history`): True when ``single`` has been measured, and then
        ``self.choice`` is the fastest measured candidate; a candidate predicted faster but
        never measured is measured first if the calibration budget allows. The run then
        starts under the choice: no profile under ``single``, no restart."""
        started = time.perf_counter()
        known = history.measured()
        base = known.get(ran("single", 1, self.base))
        if base is None or not base.steps_per_iteration:
            return False
        self.shape(base.steps_per_iteration)
        profile = Profile(base.steps_per_iteration, self.env_calls, self.grad_steps, base.parts, base.steps_per_s)
        profile = self._traffic(profile, base.threads)
        ms = {k: 1000 * v for k, v in base.parts.items()}
        single = Candidate("single", 1, base.steps_per_s, base.steps_per_s, ms, note=runs_note(base.runs))
        single.devices = self.base
        for c in self.candidates:
            if (m := known.get(ran(c.policy, c.workers, c.devices))) is not None:
                c.measured, c.note = m.steps_per_s, runs_note(m.runs)
        budget, expected_s = self._predict(profile)
        best = self._measure_within(profile, single, budget)
        why = (
            f"{best.speed / single.speed:.2f}x single's steps/s, as measured on this machine before"
            if best is not single
            else "no measured candidate is faster"
        )
        self._conclude(best, why, started, budget, expected_s, {"from_history": history.key, **asdict(profile)}, single)
        return True

    def decide(self, records: Sequence[dict[str, Any]], last: bool = False) -> bool | None:
        """The profile hook: True when the run should stop here and go on under ``self.choice``;
        None while the profile spans less than :data:`PROFILE_S` (unless this is the run's
        ``last`` iteration)."""
        if not last and records[-1]["time"] - records[0]["time"] < PROFILE_S:
            return None
        started = time.perf_counter()
        profile = self._traffic(profile_of(records, self.env_calls, self.grad_steps), self.run_dir.intra_op_threads())
        ms = {k: 1000 * v for k, v in profile.parts.items()}
        single = Candidate("single", 1, profile.steps_per_s, profile.steps_per_s, ms, note="profiled: the run's start")
        single.devices = self.base
        budget, expected_s = self._predict(profile)
        done = records[-1]["env_steps"]
        remaining = max(self.total_steps - done, 0)
        stay_s = remaining / profile.steps_per_s if profile.steps_per_s else 0.0
        top = next(iter(ranked(self.candidates)), None)
        if last:  # nothing left to go on with
            choice, why = single, "the run ended with its profile"
        elif self._worth_trying(top, single, remaining, stay_s, budget):
            choice, self.trial = top, True
            why = (
                f"{top.label} is predicted {top.predicted / single.speed:.2f}x faster: the run goes on under it, "
                f"and its first {TRIAL_S:.0f} s measure it (back to single below "
                f"{TRIAL_KEEP * single.speed:,.0f} steps/s, {TRIAL_KEEP:.0%} of single's)"
            )
        else:
            choice, why = self._measured_choice(profile, single, top, budget, remaining, stay_s)
        self._conclude(
            choice, why, started, budget, expected_s, {"iterations": len(records), **asdict(profile)}, single
        )
        if self.trial:
            self._record_trial(choice, None)
        self.publish()
        return choice is not single

    def _worth_trying(
        self, top: Candidate | None, single: Candidate, remaining: int, stay_s: float, budget: float
    ) -> bool:
        """Try the top-ranked candidate instead of measuring it apart: predicted at least
        :data:`TRY` times single's speed, switching to it pays back at that speed, and its
        start, all that is lost if it measures slower, fits the calibration budget. Not while a
        candidate of unknown speed (a GPU placement) is left to measure: a trial shows only
        the candidate it tries."""
        if top is None or top.measured is not None or top.predicted is None or top.predicted < TRY * single.speed:
            return False
        if any(c.predicted is None and c.measured is None for c in self.candidates):
            return False
        return self.start_s <= budget and remaining / top.predicted + self.start_s < stay_s

    def _measured_choice(
        self,
        profile: Profile,
        single: Candidate,
        top: Candidate | None,
        budget: float,
        remaining: int,
        stay_s: float,
    ) -> tuple[Candidate, str]:
        """Measure candidates apart within the budget; the fastest measured, if switching to it
        pays (``top``: the candidate ranked first, for the message when none is measured)."""
        best = self._measure_within(profile, single, budget)
        if best is not single:
            if remaining / best.speed + self.start_s < stay_s:
                return best, f"{best.speed / single.speed:.2f}x single's steps/s"
            return single, (
                f"{best.label} is {best.speed / single.speed:.2f}x faster, but restarting under it "
                f"(~{self.start_s:.0f} s) would not pay back over the {remaining:,} steps left"
            )
        if top is not None and top.measured is None and (top.predicted or 0.0) > single.speed:
            return single, (
                f"{top.label} is predicted {top.predicted / single.speed:.2f}x faster, but neither measuring it "
                f"({budget:.1f} s of calibration budget) nor trying it would pay back "
                f"(`rlgen bench SPEC --workers {top.workers}` measures it once; later auto runs remember)"
            )
        return single, "no measured candidate is faster"

    def trial_floor(self) -> str:
        """The tried policy's ``--trial`` argument: the speed it must reach (:data:`TRIAL_KEEP`
        of single's profile), and the iterations and seconds that measure it."""
        return f"{TRIAL_KEEP * self._single.speed:.1f}:{MEASURE_ITERATIONS}:{TRIAL_S}"

    def tried(self, speed: tuple[float, str] | None, kept: bool, spent_s: float = 0.0) -> None:
        """What trying the choice measured (steps/s and over what, or None when the run ended
        before the trial could measure it): kept, or slower than single (then the run goes back
        to single; ``spent_s``, the time the trial cost, counts as calibration)."""
        c = self.choice
        c.measured = speed[0] if speed else None
        c.note = "tried: the run went on under it" if speed else "tried: the run ended before the trial measured it"
        if not kept:
            c.note = "tried: slower than single"
            shown = "-" if speed is None else f"{speed[0]:,.0f}"
            self.choice = self._single
            self.record["choice"] = self._named(self._single)
            self.record["why"] = (
                f"{c.label} was tried and ran at {shown} steps/s, below {TRIAL_KEEP:.0%} of single's "
                f"{self._single.speed:,.0f}: the run went back to single"
            )
            self.record["calibration_s"] = round(self.record["calibration_s"] + spent_s, 3)
        self._record_trial(c, speed, kept)
        self.record["candidates"] = self._rows(self._single)
        self.publish()

    def _record_trial(self, c: Candidate, speed: tuple[float, str] | None, kept: bool | None = None) -> None:
        """``auto.trial`` in the record: what is tried, and once it has run whether it was kept
        and its measured speed, or that the run ended before it could be measured."""
        trial: dict[str, Any] = self._named(c)
        if kept is not None:
            trial["kept"] = kept
            if speed is None:
                trial["measured"] = False
                trial["note"] = (
                    f"the run ended before the trial's measurement ({MEASURE_ITERATIONS} iterations and "
                    f"{TRIAL_S:.0f} s after its first two): it went on under {c.label} unmeasured"
                )
            else:
                trial["measured"] = True
                trial["steps_per_s"], trial["measured_over"] = round(speed[0], 1), speed[1]
        self.record["trial"] = trial

    def _predict(self, profile: Profile) -> tuple[float, float]:
        """Predict every candidate from the profile; the calibration budget and the run's
        expected length (at the best predicted speed: calibration stays within its share even
        of the faster run it buys)."""
        rtt = network_rtt(self.hosts)
        for c in self.candidates:  # a placement the profile did not run is not extrapolated to
            known = c.devices == self.base
            c.predicted = predict(profile, POLICIES[c.policy], c.workers, self.cores, rtt) if known else None
        fastest = max([profile.steps_per_s, *(c.predicted or 0.0 for c in self.candidates)])
        expected_s = self.total_steps / fastest if fastest else 0.0
        budget = self.budget_s if self.budget_s is not None else CALIBRATION_SHARE * expected_s
        self.start_s = START_S
        return budget, expected_s

    def _measure_within(self, profile: Profile, single: Candidate, budget: float) -> Candidate:
        """Measure the candidates not measured yet that may beat the best measured (those of
        unknown speed all may), in :func:`calibration_order`, while the budget lasts; the best
        measured (or ``single``). An unknown one's cost is guessed at single's speed."""
        best = max([single, *self.candidates], key=lambda x: x.measured or 0.0)
        spent = 0.0
        for c in calibration_order(self.candidates):
            if c.measured is not None:
                continue
            if c.predicted is not None and c.predicted < 0.9 * best.speed:
                c.note = "not measured: predicted slower than the best measured"
                continue
            speed = c.predicted if c.predicted is not None else max(profile.steps_per_s, 1.0)
            guess = self.start_s + MEASURE_ITERATIONS * profile.steps_per_iteration / speed
            if spent + guess > budget:
                c.note = f"not measured: would take the calibration past {budget:.0f} s"
                continue
            self.measure(c)
            spent += c.cost_s
            if c.measured is not None:
                self.start_s = max(1.0, c.cost_s - MEASURE_ITERATIONS * profile.steps_per_iteration / c.measured)
                best = max(best, c, key=lambda x: x.measured or 0.0)
        return best

    def _conclude(
        self,
        choice: Candidate,
        why: str,
        started: float,
        budget: float,
        expected_s: float,
        profile: dict[str, Any],
        single: Candidate,
    ) -> None:
        self.choice, self._single = choice, single
        self.record = {
            "choice": self._named(choice),
            "why": why,
            "cores": self.cores,
            "hosts": self.hosts,
            "calibration_s": round(time.perf_counter() - started, 3),  # the profile itself is training
            "calibration_budget_s": round(budget, 3),
            "expected_run_s": round(expected_s, 3),
            "profile": profile,
            "candidates": self._rows(single),
        }

    @property
    def stays(self) -> bool:
        """The choice is where the run started (``single``, the profile's placement)."""
        return self.choice is None or self.choice is self._single

    def devices_of(self, c: Candidate) -> dict[str, str] | None:
        """The ``--devices`` value a run of ``c`` is given (None: the spec's own placement)."""
        return pinned(c.devices) if self.pinned else None

    def _named(self, c: Candidate) -> dict[str, Any]:
        return named(c, self.pinned)

    def _rows(self, single: Candidate) -> list[dict[str, Any]]:
        return [row(c, self.pinned) for c in [single, *self.candidates]]

    def publish(self) -> None:
        """Write the choice and its table to ``run.json`` and the terminal."""
        self._write()
        for line in table(self._single, self.candidates, self.choice).splitlines():
            self.note(line)
        self.note(f"auto: {self.choice.label}: {self.record['why']} (calibration {self.record['calibration_s']:.1f} s)")

    def _write(self) -> None:
        self.run_dir.update(auto=self.record)

    def _devices_argv(self, c: Candidate) -> list[str]:
        devices = self.devices_of(c)
        return ["--devices", flag_text(devices)] if devices else []

    def _measure(self, c: Candidate) -> None:
        """Train the spec under ``c`` for a few iterations in its own processes and read its speed."""
        hosts = ["--hosts", ",".join(self.hosts)] if self.hosts else []
        measure_apart(self.spec, c, ["--calibrate", *hosts, *self._devices_argv(c), *self.extra])


def measure_apart(spec: Path, c: Candidate, argv: Sequence[str]) -> None:
    """Train ``spec`` under ``c`` for :data:`MEASURE_ITERATIONS` in its own processes (``rlgen
    run`` with ``argv``), and write its speed, cost and note into ``c``."""
    from .bench import run_policy

    tmp = Path(tempfile.mkdtemp(prefix="rlgen-auto-"))
    started = time.perf_counter()
    try:
        r = run_policy(spec, c.policy, c.workers, MEASURE_ITERATIONS, tmp / "run", None, 600, list(argv))
    finally:
        c.cost_s = time.perf_counter() - started
        shutil.rmtree(tmp, ignore_errors=True)
    if r.ok and r.steps_per_s > 0:
        c.measured, c.ms = r.steps_per_s, dict(r.ms_per_iteration)
        c.note = "measured"
    elif r.ok:
        c.note = f"not measured: its {r.iterations} iteration(s) were too few to time"
    else:
        c.note = f"failed: {r.error}"


def named(c: Candidate, placed: bool) -> dict[str, Any]:
    """A candidate in ``auto``'s record: its policy and workers, and its placement (every side
    named) where the calibration places its runs (``placed``) or it is not all on the CPU."""
    out: dict[str, Any] = {"policy": c.policy, "workers": c.workers}
    return {**out, "devices": pinned(c.devices)} if placed or c.devices else out


def row(c: Candidate, placed: bool) -> dict[str, Any]:
    """A candidate in the record's table: its figures, and ``devices`` as in :func:`named`."""
    out = {k: v for k, v in asdict(c).items() if k != "devices"}
    return {**out, **{k: v for k, v in named(c, placed).items() if k == "devices"}}
