"""``--policy auto``'s cost model: from a run's profile under ``single`` (time per part per
iteration), a predicted steps/s for every candidate policy and worker count, the order it tries
them in, and the table it shows. The chooser that uses it is :mod:`rlgen.app.auto`."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlgen.codegen.policies import POLICIES, DistributionPolicy
from rlgen.dsl.hosts import slots_of
from rlgen.machine import cores_per_rank
from rlgen.runtime.clock import CATEGORIES as PARTS  # the parts a run times

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
TRANSFER_S = 0.001  # one rollout or weights message over a channel, its bytes aside
#: what a byte costs through a channel, sender and receiver together, with every core busy
#: (benchmarks/channel_bytes.py: a PPO Breakout rollout's 28.9 MB of uint8 frames in 119 ms)
BYTE_S = 4e-9
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
    predicted: float | None = 0.0  # steps/s by the cost model; None: unknown (a placement the profile did not run)
    measured: float | None = None  # steps/s measured (after the first iteration)
    ms: dict[str, float] = field(default_factory=dict)  # rank 0's ms per iteration per part, measured
    cost_s: float = 0.0  # wall time its measurement took
    note: str = ""
    devices: str = ""  # its placement: the sides not on the CPU (rlgen.dsl.devices.placement); '': all on the CPU

    @property
    def label(self) -> str:
        return f"{self.policy} ({self.workers})" + (f" {self.devices}" if self.devices else "")

    @property
    def speed(self) -> float:
        """Measured steps/s, else predicted (0 when unknown: nothing to count on)."""
        return self.measured if self.measured is not None else self.predicted or 0.0


@dataclass(frozen=True)
class Profile:
    """What the first iterations under ``single`` showed (seconds per iteration per part)."""

    steps_per_iteration: int
    env_calls: int  # env.step calls per iteration (each a round trip under central inference)
    grad_steps: int  # gradient steps per iteration (each an allreduce under multi-learner)
    parts: dict[str, float]
    steps_per_s: float
    obs_bytes: int = 0  # one env step's observations as the loop carries them (:func:`traffic`)
    weight_bytes: int = 0  # the learner's weights: a weights message, the gradients of an allreduce
    #: intra-op threads the profile's inference and update ran on: more than one where the
    #: update is heavy (rlgen.codegen.lower.threads), and then a rank of a candidate that
    #: updates gets its share of the cores (rlgen.machine.cores_per_rank)
    threads: int = 1


def predict(profile: Profile, policy: DistributionPolicy, workers: int, cores: int, network_rtt: float = 0.0) -> float:
    """Steps/s of ``policy`` on ``workers`` ranks, from ``single``'s profile.

    Each rank's time per iteration follows from the part times split over the ranks that
    share them; overlapped policies (lag ≥ 1, asynchronous) take the slowest role instead
    of the sum; no policy beats the whole work (in core-seconds) spread over the cores its
    ranks' threads can use. What crosses a cut costs a fixed time per message plus
    :data:`BYTE_S` a byte: an iteration's observations, the weights each actor pulls, an
    allreduce's gradients (twice: a ring sends and receives them). A heavy update
    (``profile.threads`` > 1) runs on the threads its rank gets here: its inference and update
    time scale with the threads, an actor's inference runs on one, and a learner's share of
    the batch saves its share of the work. ``network_rtt`` (seconds; ranks on other hosts)
    adds to every round trip: a request and its answer, a one-way message (half), and an
    allreduce (:data:`ALLREDUCE_RTTS` of them: Horovod's negotiation with its coordinator,
    then the ring)."""
    round_trip, allreduce = ROUND_TRIP_S + network_rtt, ALLREDUCE_S + ALLREDUCE_RTTS * network_rtt
    transfer = TRANSFER_S + network_rtt / 2
    p, k = profile.parts, profile.threads
    infer, env, buf = p["inference"], p["env"], p["buffer"]
    update = p["update"] + p["loop"]
    other = p["comm"] + p["other"]
    total = infer + env + buf + update + other
    # a rank that updates: its threads here, how much slower its inference and update run,
    # and the cores the candidate's ranks can use (the other ranks run one thread each)
    own = cores_per_rank(cores, workers) if k > 1 else 1
    slow = k / own
    work = (infer + update) * k + env + buf + other  # core-seconds of an iteration
    updaters = policy.learner_workers(workers) if policy.cut else 1
    used = min(workers + updaters * (own - 1), cores)
    obs = profile.steps_per_iteration * profile.obs_bytes * BYTE_S  # an iteration's observations moved
    weights = profile.weight_bytes * BYTE_S
    if policy.cut is None:
        t = total
    elif policy.cut == "experience":
        actors = policy.env_workers(workers)
        act = infer * k + (env + buf + obs) / actors + transfer + weights  # an actor's own thread
        learn = update * slow + other + transfer + obs + actors * weights
        overlapped = policy.lag > 0 or policy.asynchronous
        t = max(act, learn) if overlapped else act + learn
        t = max(t, (actors * act + learn * own) / used)
    elif policy.cut == "env" and policy.per_group:  # agent-groups: each group's compute on its own rank
        n = policy.learner_workers(workers)
        t = env + ((infer + update) * slow + buf) / n + other + profile.env_calls * (round_trip + transfer) + obs
        t = max(t, (work + profile.env_calls * round_trip + obs) / used)
    elif policy.cut == "env":
        workers_env, groups = policy.env_workers(workers), policy.env_groups
        trips = profile.env_calls * round_trip + obs  # groups' round trips overlap one another
        if groups > 1:  # a call per group, each on fewer envs (a small network's call is mostly fixed cost)
            infer_all = infer * slow * (groups + 1) / 2
            t = buf + update * slow + other + max(infer_all, env / workers_env) + trips
            t = max(t, (work + (infer_all / slow - infer) * k + trips) / used)
        else:
            t = infer * slow + buf + update * slow + other + env / workers_env + trips
            t = max(t, (work + trips) / used)
    else:  # gradients: every rank acts for its share of envs and learns on its share of the batch
        n = policy.learner_workers(workers)
        # a small network's call and update step are mostly fixed cost: a smaller batch saves
        # only part of the update; a heavy one's work goes with the batch
        share = 1 / n if k > 1 else 0.5 + 0.5 / n
        per_rank = infer * slow * (share if k > 1 else 1.0) + (env + buf) / n + update * slow * share + other
        t = max(per_rank, n * per_rank * own / used)
        t += profile.grad_steps * (allreduce + 2 * profile.weight_bytes * BYTE_S)
    return profile.steps_per_iteration / t if t > 0 else 0.0


def profile_of(records: Sequence[dict[str, Any]], env_calls: int, grad_steps: int) -> Profile:
    """The profile from a run's metric records (the first, which traces, left out)."""
    steady = list(records[1:]) or list(records)
    parts = {k: sum(r.get(f"time_{k}", 0.0) for r in steady) / len(steady) for k in PARTS}
    span = steady[-1]["time"] - records[0]["time"] if len(records) > 1 else steady[-1]["time"]
    steps = steady[-1]["env_steps"] - records[0]["env_steps"] if len(records) > 1 else steady[-1]["env_steps"]
    per_iteration = steps // len(steady)
    return Profile(per_iteration, env_calls, grad_steps, parts, steps / span if span > 0 else 0.0)


def traffic(spec: Any) -> tuple[int, int]:
    """What the cost model's messages carry, from the validated spec (rlgen.dsl.spec.Spec):
    the bytes of one env step's observations (every agent's, in the dtype the loop carries:
    a uint8 image is a byte an element, as it crosses a cut) and of the learner's weights
    (float32; a custom network, whose size is known only at run time, counts nothing). (0, 0)
    where the env's spaces cannot be read."""
    import math

    import numpy as np

    from rlgen.codegen.context import Context
    from rlgen.codegen.weights import weights_of
    from rlgen.dsl.envinfo import resolve_spaces

    spaces, _ = resolve_spaces(spec.env)
    if spaces is None:
        return 0, 0
    groups = [(g.observation, g.rows) for g in spaces.groups] or [(spaces.observation, spaces.rows)]
    obs = sum(math.prod(space.shape) * np.dtype(space.dtype).itemsize * rows for space, rows in groups)
    weights = weights_of(Context(spec, spaces, POLICIES["single"]), spec.components)
    return obs, 4 * sum(math.prod(w.shape) for w in weights if None not in w.shape)


def network_rtt(hosts: Sequence[str], port: int = 22, tries: int = 5) -> float:
    """Median TCP connect time (one round trip) to the first remote host's ssh port; 0 when
    every host is this machine or none answers."""
    from rlgen.launch.hosts import Cluster

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


def ranked(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Fastest predicted first; predictions within :data:`TIE` of each other tie, and a tie
    goes to the policy that talks least: asynchronous actors never wait on a straggler, and a
    round trip per env step is the cost the model knows least well (it varies with the load).
    Candidates with no prediction (placed where the profile did not run) come last, as given."""
    unknown = [c for c in candidates if c.predicted is None]
    order = sorted((c for c in candidates if c.predicted is not None), key=lambda c: -c.predicted)
    out: list[Candidate] = []
    while order:
        lead = order[0].predicted
        tied = [c for c in order if c.predicted >= (1 - TIE) * lead]
        out += sorted(tied, key=lambda c: (_talks(c.policy), -c.predicted))
        order = [c for c in order if c not in tied]
    return out + unknown


def calibration_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The order candidates are measured apart in: :func:`ranked`'s, with each candidate of no
    prediction (a GPU placement) right after its twin of the same policy and workers, and
    ``single`` so placed first (the whole loop on one device: the placement a GPU most
    plainly serves). A GPU candidate is thus measured where the model ranks its cut."""
    order = ranked(candidates)
    known = [c for c in order if c.predicted is not None]
    unknown = [c for c in order if c.predicted is None]
    out = [c for c in unknown if c.policy == "single"]
    for c in known:
        out += [c] + [u for u in unknown if (u.policy, u.workers) == (c.policy, c.workers) and u not in out]
    return out + [u for u in unknown if u not in out]


def _talks(policy: str) -> tuple[int, int]:
    p = POLICIES[policy]
    return (0 if p.asynchronous else _TALK.get(p.cut or "", 0), p.env_groups)


def runs_note(n: int) -> str:
    return f"measured before ({n} run{'s' if n != 1 else ''}, median)"


def table(single: Candidate, candidates: Sequence[Candidate], choice: Candidate) -> str:
    """The calibration table, one candidate per line ("unknown": no prediction)."""
    rows = [single, *candidates]
    w = max(24, *(len(c.label) for c in rows))  # placed labels are longer
    lines = [f"{'policy (workers)':<{w}} {'predicted':>10} {'measured':>10}  ms/iteration inference/env/update  note"]
    for c in rows:
        predicted = f"{c.predicted:>10,.0f}" if c.predicted is not None else f"{'unknown':>10}"
        measured = f"{c.measured:>10,.0f}" if c.measured is not None else f"{'-':>10}"
        ms = "/".join(f"{c.ms.get(k, 0.0):.0f}" for k in ("inference", "env", "update")) if c.ms else "-"
        mark = " <- chosen" if c is choice else ""
        lines.append(f"{c.label:<{w}} {predicted} {measured}  {ms:<34} {c.note}{mark}")
    return "\n".join(lines)
