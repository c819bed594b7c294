"""How the ranks of a run agree on where to start and when to stop.

Rank 0 leads: it owns the run's statistics and the stop decision. The other ranks report
the episodes they finished (and whether they were asked to stop) at the end of every
iteration, over their channel to rank 0, tagged with the iteration:

* :class:`LockstepControl` — every rank waits for rank 0's verdict each iteration, so all
  stop after the same iteration. For ranks that meet inside every iteration anyway
  (multi-learner's gradient allreduce, central inference's env steps): a rank that
  stopped alone would leave the others waiting. One message round trip per iteration.
* :class:`AlignedControl` — the other ranks never wait for rank 0; rank 0 counts each
  rank's episodes of iteration *k* at its own iteration *k* (they travel right after the
  data it learns from), so the logged statistics follow the data, not the timing. A stop
  verdict reaches the others whenever it is sent: any wait on a channel then ends with
  :class:`~rlgen.runtime.channels.Stopped`. For actors a bounded lag ahead of the learner.
* :class:`StreamControl` — like aligned, but rank 0 counts whatever reports have arrived:
  for actors that run at their own pace (asynchronous actors).
* :class:`LocalControl` — one process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from .channels import Mesh, Stopped, pack, unpack

#: Channel tags of the control messages (generated transfers use small tags); ``POLICY``: a
#: group's policy weights for rank 0 (``agent-groups``, :mod:`rlgen.runtime.evaluation.remote`).
REPORT, VERDICT, BEGIN, POLICY = 60_000, 60_001, 60_002, 60_003
#: Added to a lockstep verdict's header when rank 0 wants the groups' policy weights after it.
FETCH = 16
#: Stop reasons as verdict headers (0: go on). ``switch``: the run goes on under another policy
#: (``--policy auto``: a tried policy ran slower than ``single``); ``terminated``: SIGTERM.
REASONS = ("", "interrupted", "mean return reached", "stopped by rank 0", "switch", "terminated")

Episodes = list[tuple[float, int]]


#: How many per-part times (seconds, in rlgen.runtime.clock.CATEGORIES order) a report carries.
PARTS = 7


def _encode(episodes: Episodes, parts: Sequence[float], metrics: Mapping[str, float] | None = None) -> bytes:
    rows = np.asarray(episodes, np.float64).reshape(-1, 2)
    named = json.dumps(dict(metrics or {}), separators=(",", ":")).encode() if metrics else b""
    return pack([np.asarray(parts, np.float64).reshape(PARTS), np.asarray([len(rows)], np.float64), rows]) + named


def _decode(payload: bytes) -> tuple[Episodes, np.ndarray, dict[str, float]]:
    head = 8 * (PARTS + 1)
    n = int(np.frombuffer(payload, np.float64, 1, 8 * PARTS)[0])
    parts, _, rows = unpack(payload[: head + 16 * n], [((PARTS,), "float64"), ((1,), "float64"), ((n, 2), "float64")])
    rest = bytes(payload[head + 16 * n :])
    metrics = {str(k): float(v) for k, v in json.loads(rest).items()} if rest else {}
    return [(float(r), int(c)) for r, c in rows], parts, metrics


class Report:
    """What rank 0 gathers at the end of an iteration: every rank's finished episodes, whether
    any was asked to stop, the other ranks' time per part (summed over their reports) and the
    learner metrics other ranks log through rank 0 (``agent-groups``: each group's, by name)."""

    def __init__(self, episodes: Episodes, interrupted: bool) -> None:
        self.episodes, self.interrupted = list(episodes), interrupted
        self.parts = np.zeros(PARTS)
        self.count = 0  # reports from other ranks
        self.metrics: dict[str, float] = {}

    def add(self, header: int, payload: bytes) -> None:
        episodes, parts, metrics = _decode(payload)
        self.episodes += episodes
        self.metrics.update(metrics)
        self.interrupted = self.interrupted or bool(header & 1)
        self.parts += parts
        self.count += 1

    def rest_parts(self) -> np.ndarray | None:
        """The other ranks' mean time per part over the reports taken, or None if none came."""
        return self.parts / self.count if self.count else None


def _header(iteration: int, interrupted: bool) -> int:
    return 2 * iteration + int(interrupted)


class LocalControl:
    """One process: nothing to agree on."""

    fetch = False  # the last verdict asked this rank for its policy weights (lockstep only)

    def begin(self, start: int) -> int:
        return start

    def report(
        self,
        iteration: int,
        episodes: Episodes,
        interrupted: bool,
        parts: Sequence[float],
        metrics: Mapping[str, float] | None = None,
    ) -> Report:
        """Iteration ``iteration``'s report of every rank as rank 0 counts it (episodes, stop
        requests, the others' time per part ``parts``, the learner ``metrics`` a rank other
        than 0 has rank 0 log); other ranks get their own back."""
        return Report(episodes, interrupted)

    def verdict(self, reason: str, fetch: bool = False) -> str:
        """Rank 0's decision for this iteration, as this rank learns it ("" to go on); ``fetch``
        (rank 0, lockstep): the other ranks send their policy weights next (:attr:`fetch`)."""
        return reason

    def stop_reason(self) -> str:
        """Why a wait of this rank was ended by rank 0."""
        return REASONS[3]


class LockstepControl(LocalControl):
    """Every rank reports and waits for rank 0's verdict every iteration (see the module docstring)."""

    def __init__(self, mesh: Mesh, rank: int, size: int) -> None:
        self.mesh, self.rank, self.others = mesh, rank, range(1, size)

    def begin(self, start: int) -> int:
        if self.rank == 0:
            for r in self.others:
                self.mesh.send(r, BEGIN, header=start)
            return start
        return self.mesh.recv(0, BEGIN)[0]

    def report(self, iteration, episodes, interrupted, parts, metrics=None) -> Report:
        out = Report(episodes, interrupted)
        if self.rank != 0:
            self.mesh.send(0, REPORT, _encode(episodes, parts, metrics), header=_header(iteration, interrupted))
            return out
        for r in self.others:
            out.add(*self.mesh.recv(r, REPORT))
        return out

    def verdict(self, reason: str, fetch: bool = False) -> str:
        if self.rank == 0:
            for r in self.others:
                self.mesh.send(r, VERDICT, header=REASONS.index(reason) + FETCH * fetch)
            return reason
        header = self.mesh.recv(0, VERDICT)[0]
        self.fetch = bool(header & FETCH)
        return REASONS[header % FETCH]


class StreamControl(LockstepControl):
    """Reports go one way and rank 0 counts what has arrived; a stop verdict ends waits elsewhere."""

    def __init__(self, mesh: Mesh, rank: int, size: int) -> None:
        super().__init__(mesh, rank, size)
        mesh.stop_tag = VERDICT  # a stop verdict interrupts any wait on a channel

    def report(self, iteration, episodes, interrupted, parts, metrics=None) -> Report:
        if self.rank != 0:
            return super().report(iteration, episodes, interrupted, parts, metrics)
        out = Report(episodes, interrupted)
        for r in self.others:
            while (frame := self.mesh.poll(r, REPORT)) is not None:
                out.add(*frame)
        return out

    def verdict(self, reason: str, fetch: bool = False) -> str:
        if self.rank == 0:
            if reason:
                for r in self.others:
                    self.mesh.send(r, VERDICT, header=REASONS.index(reason))
            return reason
        frame = self.mesh.poll(0, VERDICT)
        if frame is not None:
            return REASONS[frame[0]]
        return REASONS[3] if self.mesh.finished(0) else ""

    def stop_reason(self) -> str:
        frame = self.mesh.poll(0, VERDICT)
        return REASONS[frame[0]] if frame is not None and frame[0] else REASONS[3]


class AlignedControl(StreamControl):
    """Stream control whose rank 0 counts each rank's reports up to its own iteration, waiting
    for those that are due (they follow the data rank 0 has just received)."""

    def __init__(self, mesh: Mesh, rank: int, size: int) -> None:
        super().__init__(mesh, rank, size)
        self.counted = dict.fromkeys(self.others, -1)  # the last iteration counted, per rank

    def report(self, iteration, episodes, interrupted, parts, metrics=None) -> Report:
        if self.rank != 0:
            return super().report(iteration, episodes, interrupted, parts, metrics)
        out = Report(episodes, interrupted)
        for r in self.others:
            while self.counted[r] < iteration:
                try:
                    header, payload = self.mesh.recv(r, REPORT)
                except Stopped:  # rank r finished meanwhile
                    break
                out.add(header, payload)
                self.counted[r] = header // 2
        return out


CONTROLS = {"lockstep": LockstepControl, "aligned": AlignedControl, "stream": StreamControl}
