"""A distribution policy is data: where it cuts, which roles run which side, what crosses and how."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: Horovod collectives: every rank of the process set takes part, each one a meeting.
COLLECTIVE_OPS = frozenset({"allgather", "alltoall", "broadcast", "allreduce"})
#: One-way transfers over point-to-point channels (rlgen.runtime.channels): ``send`` is a
#: queue (taken in order; the sender does not wait), ``publish`` a versioned latest value
#: (the receiver takes the newest, waiting only when it is older than the lag allows).
CHANNEL_OPS = frozenset({"send", "publish"})


@dataclass(frozen=True)
class Role:
    """A group of ranks running the same fragments.

    ``ranks`` is ``"0"`` (rank 0 only), ``"rest"`` (ranks 1..N-1) or ``"all"``.
    ``side`` says which side of the cut the role runs: ``"acting"`` (before an
    experience cut / the env side of an env cut) or ``"learning"``; ``"both"``
    when the role runs the whole loop.
    """

    name: str
    ranks: str
    side: str

    def rank_list(self, workers: int) -> list[int]:
        if self.ranks.isdigit():  # one rank (a per-group role of ``agent-groups``)
            return [int(self.ranks)] if int(self.ranks) < workers else []
        return {"0": [0], "rest": list(range(1, workers)), "all": list(range(workers))}[self.ranks]


@dataclass(frozen=True)
class Edge:
    """What crosses the cut from role ``src`` to role ``dst``, and by which operation.

    ``carries``: ``send``/``receive`` (a partition's values), ``weights`` (the learner's
    variables) or ``reduce`` (gradients, inside the update). ``op`` is a Horovod
    collective (:data:`COLLECTIVE_OPS`) or a channel operation (:data:`CHANNEL_OPS`).
    """

    carries: str
    src: str
    dst: str
    op: str

    @property
    def channel(self) -> bool:
        return self.op in CHANNEL_OPS


@dataclass(frozen=True)
class DistributionPolicy:
    """Declarative description of one distribution policy (one file per policy).

    ``lag`` is how many learner updates behind the weights an actor acts with are by
    default (``deploy.lag`` overrides it up to ``max_lag``): 0 is lockstep, 1 lets actors
    roll out the next batch while the learner learns from the last one. An
    ``asynchronous`` policy's actors never wait for weights and take the newest; its
    learner drops experience more than ``lag`` updates old instead. ``control`` is how
    ranks agree on stopping (see rlgen.runtime.control): ``lockstep`` (every iteration, all
    ranks together: for ranks that meet inside an iteration anyway), ``aligned`` (rank 0
    counts the others' reports in step with their data) or ``stream`` (as they arrive).
    ``env_groups`` (env cut): each env worker's envs in that many groups, stepped one group
    at a time while the learner acts for the next (pipelined); 1 steps them all at once.
    """

    name: str
    summary: str
    cut: str | None  # partition kind: None | "env" | "experience" | "gradients"
    roles: tuple[Role, ...]
    edges: tuple[Edge, ...] = ()
    min_workers: int = 1
    max_workers: int | None = None
    env_role: str = "main"  # the role whose ranks step environments
    learner_role: str = "main"  # the role whose ranks run learner updates
    lag: int = 0
    max_lag: int = 0
    control: str = "lockstep"
    asynchronous: bool = False  # actors never wait; the learner takes experience as it arrives
    env_groups: int = 1
    #: One role per agent group (rank 1 + i for group i), in place of the learning role: the
    #: policy as built for a spec comes from :meth:`for_groups`.
    per_group: bool = False

    def for_groups(self, groups: tuple[str, ...]) -> DistributionPolicy:
        """A ``per_group`` policy for a spec with these agent groups: the learning role becomes
        one role per group, on rank 1 + its index, with the learning role's edges."""
        if not self.per_group or not groups:
            return self
        learning = self.role(self.learner_role)
        roles = tuple(r for r in self.roles if r is not learning) + tuple(
            Role(g, str(i + 1), learning.side) for i, g in enumerate(groups)
        )

        def each(name: str, g: str) -> str:
            return g if name == learning.name else name

        edges = tuple(
            dict.fromkeys(
                dataclasses.replace(e, src=each(e.src, g), dst=each(e.dst, g)) for e in self.edges for g in groups
            )
        )
        return dataclasses.replace(
            self,
            roles=roles,
            edges=edges,
            min_workers=1 + len(groups),
            max_workers=1 + len(groups),
            learner_role=groups[0],
        )

    def role(self, name: str) -> Role:
        return next(r for r in self.roles if r.name == name)

    def edge(self, carries: str, src: str | None = None, dst: str | None = None) -> Edge | None:
        """The edge carrying ``carries`` (between ``src`` and ``dst`` if given), or None."""
        return next(
            (e for e in self.edges if e.carries == carries and src in (None, e.src) and dst in (None, e.dst)),
            None,
        )

    def edges_between(self, src: str, dst: str) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.src == src and e.dst == dst)

    def env_workers(self, workers: int) -> int:
        return len(self.role(self.env_role).rank_list(workers))

    def learner_workers(self, workers: int) -> int:
        return len(self.role(self.learner_role).rank_list(workers))

    def placement(self, workers: int) -> dict[int, str]:
        """rank → role name."""
        out: dict[int, str] = {}
        for role in self.roles:
            for rank in role.rank_list(workers):
                out.setdefault(rank, role.name)
        return dict(sorted(out.items()))
