"""How the ranks of a run agree on where to start and when to stop.

Rank 0 leads: it owns the run's statistics and the stop decision. The other ranks report
the episodes they finished (and whether they were asked to stop) at the end of every
iteration, over their channel to rank 0:

* :class:`LockstepControl` — every rank waits for rank 0's verdict each iteration, so all
  stop after the same iteration. Needed when ranks meet in collectives inside an iteration
  (multi-learner's gradient allreduce): a rank that stopped alone would leave the others
  waiting. One message round trip per iteration.
* :class:`StreamControl` — ranks never wait for rank 0: reports go one way, and a stop
  verdict reaches the others whenever it is sent (any wait on a channel then ends with
  :class:`~rlgen.runtime.channels.Stopped`). For policies whose ranks progress at their
  own pace (actors ahead of the learner by up to their lag).
* :class:`LocalControl` — one process.
"""

from __future__ import annotations

import numpy as np

from .channels import Mesh, pack, unpack

#: Channel tags of the control messages (generated transfers use small tags).
REPORT, VERDICT, BEGIN = 60_000, 60_001, 60_002
#: Stop reasons as verdict headers (0: go on).
REASONS = ("", "interrupted", "mean return reached")

Episodes = list[tuple[float, int]]


def _encode(episodes: Episodes) -> bytes:
    return pack([np.asarray(episodes, np.float64).reshape(-1, 2)])


def _decode(payload: bytes) -> Episodes:
    (rows,) = unpack(payload, [((len(payload) // 16, 2), "float64")])
    return [(float(r), int(n)) for r, n in rows]


class LocalControl:
    """One process: nothing to agree on."""

    def begin(self, start: int) -> int:
        return start

    def report(self, episodes: Episodes, interrupted: bool) -> tuple[Episodes, bool]:
        """This iteration's episodes of every rank (rank 0) and whether any rank was interrupted."""
        return episodes, interrupted

    def verdict(self, reason: str) -> str:
        """Rank 0's decision for this iteration, as every rank learns it ("" to go on)."""
        return reason


class LockstepControl(LocalControl):
    """Every rank reports and waits for rank 0's verdict every iteration (see the module docstring)."""

    def __init__(self, mesh: Mesh, rank: int, size: int) -> None:
        self.mesh, self.rank, self.others = mesh, rank, range(1, size)
        mesh.stop_tag = None

    def begin(self, start: int) -> int:
        if self.rank == 0:
            for r in self.others:
                self.mesh.send(r, BEGIN, header=start)
            return start
        return self.mesh.recv(0, BEGIN)[0]

    def report(self, episodes: Episodes, interrupted: bool) -> tuple[Episodes, bool]:
        if self.rank != 0:
            self.mesh.send(0, REPORT, _encode(episodes), header=int(interrupted))
            return episodes, interrupted
        everyone = list(episodes)
        for r in self.others:
            flag, payload = self.mesh.recv(r, REPORT)
            everyone += _decode(payload)
            interrupted = interrupted or bool(flag)
        return everyone, interrupted

    def verdict(self, reason: str) -> str:
        if self.rank == 0:
            for r in self.others:
                self.mesh.send(r, VERDICT, header=REASONS.index(reason))
            return reason
        return REASONS[self.mesh.recv(0, VERDICT)[0]]


class StreamControl(LockstepControl):
    """Reports go one way; a stop verdict ends the others' waits whenever it comes."""

    def __init__(self, mesh: Mesh, rank: int, size: int) -> None:
        super().__init__(mesh, rank, size)
        mesh.stop_tag = VERDICT  # a stop verdict interrupts any wait on a channel

    def report(self, episodes: Episodes, interrupted: bool) -> tuple[Episodes, bool]:
        if self.rank != 0:
            self.mesh.send(0, REPORT, _encode(episodes), header=int(interrupted))
            return episodes, interrupted
        everyone = list(episodes)
        for r in self.others:
            while (frame := self.mesh.poll(r, REPORT)) is not None:
                flag, payload = frame
                everyone += _decode(payload)
                interrupted = interrupted or bool(flag)
        return everyone, interrupted

    def verdict(self, reason: str) -> str:
        if self.rank == 0:
            if reason:
                for r in self.others:
                    self.mesh.send(r, VERDICT, header=REASONS.index(reason))
            return reason
        frame = self.mesh.poll(0, VERDICT)
        return REASONS[frame[0]] if frame is not None else ""

    def stop_reason(self) -> str:
        """The verdict that interrupted a wait (a worker's view), or "interrupted"."""
        frame = self.mesh.poll(0, VERDICT)
        return REASONS[frame[0]] if frame is not None and frame[0] else "interrupted"
