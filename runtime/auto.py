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

When this machine has measured the spec before (:mod:`rlgen.runtime.history`: every
finished run keeps its speed), :meth:`Chooser.recall` decides before the run starts, from
those measurements, and the run starts straight under the choice.

The choice and the table (predicted and measured steps/s, ms per part) go to ``run.json``
under ``auto`` and to the terminal.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlgen.codegen.passes import slots_of
from rlgen.codegen.policies import POLICIES, DistributionPolicy

from .history import History
from .machine import local_cores
from .session import CATEGORIES as PARTS  # the parts a run times

#: The most calibration may cost, as a share of the run's expected length.
CALIBRATION_SHARE = 0.10
#: Iterations of the run profiled under ``single`` (the first is left out: tracing), and the
#: seconds they span at least (a few short iterations say little: an evaluation or a
#: checkpoint in one of them halves their speed).
PROFILE_ITERATIONS = 4
PROFILE_S = 2.0
#: A tried policy is measured over at least MEASURE_ITERATIONS and this many seconds after its
#: first two iterations, and kept at this share of single's profiled speed or more (going back
#: costs another start; within this share the two are a measurement's noise apart).
TRIAL_S = 3.0
TRIAL_KEEP = 0.9
#: Iterations of a measured candidate (the first is left out).
MEASURE_ITERATIONS = 8  # overlapped policies run ahead at first: fewer overstate them
#: Most workers tried on one machine (its cores + 1, since a learner waiting on a channel
#: needs no core of its own).
MAX_LOCAL_WORKERS = 4

# Costs the model takes as given (measured on the reference machine, docs/benchmarks.md):
#: one request and answer over a channel, per env step under central inference, with every
#: core busy (Ant-v5, benchmarks/policy_switch.py: the learner's comm less its env workers'
#: env time, per env step, 0.95 ms with 1 and 1.0 ms with 2 workers; 0.06 ms on an idle machine)
ROUND_TRIP_S = 0.001
ALLREDUCE_S = 0.0034  # one Horovod allreduce of a small network's gradients
TRANSFER_S = 0.001  # one rollout or weights message over a channel
#: starting a measurement's or the chosen policy's ranks until their first iteration, until a
#: measurement says better (benchmarks/dist_start.py: 7-10 s outside the clock for 2-3 ranks)
START_S = 10.0
#: The candidate ranked first, predicted at least this much faster than ``single``, is tried
#: rather than measured apart: the run goes on under it, its own first iterations (which
#: train; :data:`TRIAL_S`) measure it, and it comes back to ``single`` below
#: :data:`TRIAL_KEEP` of the profile's speed. Closer calls are measured apart.
TRY = 1.15
#: Predicted speeds this close count as a tie, broken toward the policy that talks least
#: (asynchronous actors, then other experience cuts, then gradients, then env cuts).
TIE = 0.05
_TALK = {"experience": 1, "gradients": 2, "env": 3}
ALLREDUCE_RTTS = 6  # network round trips per allreduce across hosts (benchmarks/host_latency.py: 6-8)


@dataclass
class Candidate:
    policy: str
    workers: int
    predicted: float = 0.0  # steps/s by the cost model
    measured: float | None = None  # steps/s measured (after the first iteration)
    ms: dict[str, float] = field(default_factory=dict)  # rank 0's ms per iteration per part, measured
    cost_s: float = 0.0  # wall time its measurement took
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.policy} ({self.workers})"

    @property
    def speed(self) -> float:
        return self.measured if self.measured is not None else self.predicted


@dataclass(frozen=True)
class Profile:
    """What the first iterations under ``single`` showed (seconds per iteration per part)."""

    steps_per_iteration: int
    env_calls: int  # env.step calls per iteration (each a round trip under central inference)
    grad_steps: int  # gradient steps per iteration (each an allreduce under multi-learner)
    parts: dict[str, float]
    steps_per_s: float


def predict(profile: Profile, policy: DistributionPolicy, workers: int, cores: int, network_rtt: float = 0.0) -> float:
    """Steps/s of ``policy`` on ``workers`` ranks, from ``single``'s profile.

    Each rank's time per iteration follows from the part times split over the ranks that
    share them; overlapped policies (lag ≥ 1, asynchronous) take the slowest role instead
    of the sum; no policy beats the whole work spread over ``min(workers, cores)`` cores.
    ``network_rtt`` (seconds; ranks on other hosts) adds to every round trip: a request
    and its answer, a one-way message (half), and an allreduce (:data:`ALLREDUCE_RTTS` of
    them: Horovod's negotiation with its coordinator, then the ring)."""
    round_trip, allreduce = ROUND_TRIP_S + network_rtt, ALLREDUCE_S + ALLREDUCE_RTTS * network_rtt
    transfer = TRANSFER_S + network_rtt / 2
    p = profile.parts
    infer, env, buf = p["inference"], p["env"], p["buffer"]
    update = p["update"] + p["loop"]
    other = p["comm"] + p["other"]
    total = infer + env + buf + update + other
    used = min(workers, cores)
    if policy.cut is None:
        t = total
    elif policy.cut == "experience":
        actors = policy.env_workers(workers)
        act = infer + (env + buf) / actors + transfer
        learn = update + other + transfer
        overlapped = policy.lag > 0 or policy.asynchronous
        t = max(act, learn) if overlapped else act + learn
        t = max(t, (actors * act + learn) / used)
    elif policy.cut == "env":
        workers_env, groups = policy.env_workers(workers), policy.env_groups
        trips = profile.env_calls * round_trip  # groups' round trips overlap one another
        if groups > 1:  # a call per group, each on fewer envs (a small network's call is mostly fixed cost)
            infer_all = infer * (groups + 1) / 2
            t = buf + update + other + max(infer_all, env / workers_env) + trips
            t = max(t, (total - infer + infer_all + trips) / used)
        else:
            t = infer + buf + update + other + env / workers_env + trips
            t = max(t, (total + trips) / used)
    else:  # gradients: every rank acts for its share of envs and learns on its share of the batch
        n = policy.learner_workers(workers)
        # a small network's update step is mostly fixed cost: a smaller batch saves only part of it
        per_rank = infer + (env + buf) / n + update * (0.5 + 0.5 / n) + other
        t = max(per_rank, n * per_rank / used) + profile.grad_steps * allreduce
    return profile.steps_per_iteration / t if t > 0 else 0.0


def profile_of(records: Sequence[dict[str, Any]], env_calls: int, grad_steps: int) -> Profile:
    """The profile from a run's metric records (the first, which traces, left out)."""
    steady = list(records[1:]) or list(records)
    parts = {k: sum(r.get(f"time_{k}", 0.0) for r in steady) / len(steady) for k in PARTS}
    span = steady[-1]["time"] - records[0]["time"] if len(records) > 1 else steady[-1]["time"]
    steps = steady[-1]["env_steps"] - records[0]["env_steps"] if len(records) > 1 else steady[-1]["env_steps"]
    per_iteration = steps // len(steady)
    return Profile(per_iteration, env_calls, grad_steps, parts, steps / span if span > 0 else 0.0)


def network_rtt(hosts: Sequence[str], port: int = 22, tries: int = 5) -> float:
    """Median TCP connect time (one round trip) to the first remote host's ssh port; 0 when
    every host is this machine or none answers."""
    from .hosts import Cluster

    remote = Cluster(tuple(hosts)).remote()
    if not remote:
        return 0.0
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        try:
            socket.create_connection((remote[0], port), timeout=2.0).close()
        except OSError:
            return 0.0
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def worker_counts(hosts: Sequence[str], cores: int, given: int) -> list[int]:
    """Worker counts to try: up to the hosts' slots, or ``given`` (``--workers``), or this
    machine's cores + 1 (at most :data:`MAX_LOCAL_WORKERS`)."""
    if hosts:
        limit = slots_of(hosts)
    elif given > 1:
        limit = given
    else:
        limit = min(cores + 1, MAX_LOCAL_WORKERS)
    return list(range(2, limit + 1))


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
    ) -> None:
        self.spec, self.total_steps, self.run_dir, self.hosts = spec, total_steps, run_dir, list(hosts)
        self.env_calls, self.grad_steps = env_calls, grad_steps
        self.cores = cores or local_cores()
        self.candidates = [Candidate(p, w) for p, w in candidates]
        self.note = note
        self.measure = measure or self._measure
        self.choice: Candidate | None = None
        self.trial = False  # the choice is tried unmeasured (see TRY)
        self.record: dict[str, Any] = {}
        self.budget_s = budget_s  # None: CALIBRATION_SHARE of the run's expected length
        self.model = model  # the validated spec (rlgen.dsl.spec.Spec), for :meth:`shape`
        self.extra = list(extra)  # the command line's --seed/--set: candidates run the same algorithm

    def shape(self, steps_per_iteration: int) -> None:
        """Env calls and gradient steps per iteration, from the spec and its iteration size."""
        spec = self.model
        self.env_calls = max(1, steps_per_iteration // spec.env.num_envs)
        self.grad_steps = 1
        for comp in spec.components.values():
            if comp.get("epochs") and comp.get("minibatch"):  # epochs of minibatches (ppo)
                self.grad_steps = comp.get("epochs") * max(1, steps_per_iteration // comp.get("minibatch"))

    def recall(self, history: History) -> bool:
        """Choose before the run starts, from what this machine measured for the spec before
        (:mod:`rlgen.runtime.history`): True when ``single`` has been measured, and then
        ``self.choice`` is the fastest measured candidate; a candidate predicted faster but
        never measured is measured first if the calibration budget allows. The run then
        starts under the choice: no profile under ``single``, no restart."""
        started = time.perf_counter()
        known = history.measured()
        base = known.get(("single", 1))
        if base is None or not base.steps_per_iteration:
            return False
        self.shape(base.steps_per_iteration)
        profile = Profile(base.steps_per_iteration, self.env_calls, self.grad_steps, base.parts, base.steps_per_s)
        ms = {k: 1000 * v for k, v in base.parts.items()}
        single = Candidate("single", 1, base.steps_per_s, base.steps_per_s, ms, note=_runs(base.runs))
        for c in self.candidates:
            if (m := known.get((c.policy, c.workers))) is not None:
                c.measured, c.note = m.steps_per_s, _runs(m.runs)
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
        profile = profile_of(records, self.env_calls, self.grad_steps)
        ms = {k: 1000 * v for k, v in profile.parts.items()}
        single = Candidate("single", 1, profile.steps_per_s, profile.steps_per_s, ms, note="profiled: the run's start")
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
        start, all that is lost if it measures slower, fits the calibration budget."""
        if top is None or top.measured is not None or top.predicted < TRY * single.speed:
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
        if top is not None and top.measured is None and top.predicted > single.speed:
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

    def tried(self, steps_per_s: float | None, kept: bool, spent_s: float = 0.0) -> None:
        """What trying the choice measured: kept, or slower than single (then the run goes back
        to single; ``spent_s``, the time the trial cost, counts as calibration)."""
        c = self.choice
        c.measured, c.note = steps_per_s, "tried: the run went on under it"
        if not kept:
            c.note = "tried: slower than single"
            shown = "-" if steps_per_s is None else f"{steps_per_s:,.0f}"
            self.choice = self._single
            self.record["choice"] = {"policy": "single", "workers": 1}
            self.record["why"] = (
                f"{c.label} was tried and ran at {shown} steps/s, below {TRIAL_KEEP:.0%} of single's "
                f"{self._single.speed:,.0f}: the run went back to single"
            )
            self.record["calibration_s"] = round(self.record["calibration_s"] + spent_s, 3)
        self._record_trial(c, steps_per_s, kept)
        self.record["candidates"] = [asdict(self._single)] + [asdict(x) for x in self.candidates]
        self.publish()

    def _record_trial(self, c: Candidate, steps_per_s: float | None, kept: bool | None = None) -> None:
        """``auto.trial`` in the record: what is tried, its measured speed and whether it was
        kept (both unknown until the trial has run)."""
        trial = {"policy": c.policy, "workers": c.workers, "steps_per_s": steps_per_s}
        self.record["trial"] = trial if kept is None else {**trial, "kept": kept}

    def _predict(self, profile: Profile) -> tuple[float, float]:
        """Predict every candidate from the profile; the calibration budget and the run's
        expected length (at the best predicted speed: calibration stays within its share even
        of the faster run it buys)."""
        rtt = network_rtt(self.hosts)
        for c in self.candidates:
            c.predicted = predict(profile, POLICIES[c.policy], c.workers, self.cores, rtt)
        fastest = max([profile.steps_per_s, *(c.predicted for c in self.candidates)])
        expected_s = self.total_steps / fastest if fastest else 0.0
        budget = self.budget_s if self.budget_s is not None else CALIBRATION_SHARE * expected_s
        self.start_s = START_S
        return budget, expected_s

    def _measure_within(self, profile: Profile, single: Candidate, budget: float) -> Candidate:
        """Measure the candidates not measured yet that may beat the best measured, in
        :func:`ranked` order, while the budget lasts; the best measured (or ``single``)."""
        best = max([single, *self.candidates], key=lambda x: x.measured or 0.0)
        spent = 0.0
        for c in ranked(self.candidates):
            if c.measured is not None:
                continue
            if c.predicted < 0.9 * best.speed:
                c.note = "not measured: predicted slower than the best measured"
                continue
            guess = self.start_s + MEASURE_ITERATIONS * profile.steps_per_iteration / c.predicted
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
            "choice": {"policy": choice.policy, "workers": choice.workers},
            "why": why,
            "cores": self.cores,
            "hosts": self.hosts,
            "calibration_s": round(time.perf_counter() - started, 3),  # the profile itself is training
            "calibration_budget_s": round(budget, 3),
            "expected_run_s": round(expected_s, 3),
            "profile": profile,
            "candidates": [asdict(single)] + [asdict(c) for c in self.candidates],
        }

    def publish(self) -> None:
        """Write the choice and its table to ``run.json`` and the terminal."""
        self._write()
        for line in table(self._single, self.candidates, self.choice).splitlines():
            self.note(line)
        self.note(f"auto: {self.choice.label}: {self.record['why']} (calibration {self.record['calibration_s']:.1f} s)")

    def _write(self) -> None:
        from .launch import update_run_json

        update_run_json(self.run_dir, auto=self.record)

    def _measure(self, c: Candidate) -> None:
        """Train the spec under ``c`` for a few iterations in its own processes and read its speed."""
        from .bench import run_policy

        tmp = Path(tempfile.mkdtemp(prefix="rlgen-auto-"))
        started = time.perf_counter()
        try:
            hosts = ["--hosts", ",".join(self.hosts)] if self.hosts else []
            r = run_policy(
                self.spec,
                c.policy,
                c.workers,
                MEASURE_ITERATIONS,
                tmp / "run",
                None,
                600,
                ["--calibrate", *hosts, *self.extra],
            )
        finally:
            c.cost_s = time.perf_counter() - started
            shutil.rmtree(tmp, ignore_errors=True)
        if r.ok:
            c.measured, c.ms = r.steps_per_s, dict(r.ms_per_iteration)
            c.note = "measured"
        else:
            c.note = f"failed: {r.error}"


def ranked(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Fastest predicted first; predictions within :data:`TIE` of each other tie, and a tie
    goes to the policy that talks least: asynchronous actors never wait on a straggler, and a
    round trip per env step is the cost the model knows least well (it varies with the load)."""
    order = sorted(candidates, key=lambda c: -c.predicted)
    out: list[Candidate] = []
    while order:
        lead = order[0].predicted
        tied = [c for c in order if c.predicted >= (1 - TIE) * lead]
        out += sorted(tied, key=lambda c: (_talks(c.policy), -c.predicted))
        order = [c for c in order if c not in tied]
    return out


def _talks(policy: str) -> tuple[int, int]:
    p = POLICIES[policy]
    return (0 if p.asynchronous else _TALK.get(p.cut or "", 0), p.env_groups)


def _runs(n: int) -> str:
    return f"measured before ({n} run{'s' if n != 1 else ''}, median)"


def table(single: Candidate, candidates: Sequence[Candidate], choice: Candidate) -> str:
    """The calibration table, one candidate per line."""
    lines = [f"{'policy (workers)':<24} {'predicted':>10} {'measured':>10}  ms/iteration inference/env/update  note"]
    for c in [single, *candidates]:
        measured = f"{c.measured:>10,.0f}" if c.measured is not None else f"{'-':>10}"
        ms = "/".join(f"{c.ms.get(k, 0.0):.0f}" for k in ("inference", "env", "update")) if c.ms else "-"
        mark = " <- chosen" if c is choice else ""
        lines.append(f"{c.label:<24} {c.predicted:>10,.0f} {measured}  {ms:<34} {c.note}{mark}")
    return "\n".join(lines)
