"""A distribution policy is data: where it cuts, which roles run which side, which collectives cross."""

from __future__ import annotations

from dataclasses import dataclass


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
        return {"0": [0], "rest": list(range(1, workers)), "all": list(range(workers))}[self.ranks]


@dataclass(frozen=True)
class Collective:
    """A Horovod collective at the cut: what it carries and between which roles."""

    op: str  # allgather | broadcast | allreduce | alltoall
    carries: str  # "send" | "receive" | "reduce" | "weights"
    direction: str  # e.g. "env -> inference"
    process_set: str  # "all" or a role name


@dataclass(frozen=True)
class DistributionPolicy:
    """Declarative description of one distribution policy (one file per policy)."""

    name: str
    summary: str
    cut: str | None  # partition kind: None | "env" | "experience" | "gradients"
    roles: tuple[Role, ...]
    collectives: tuple[Collective, ...] = ()
    min_workers: int = 1
    max_workers: int | None = None
    env_role: str = "main"  # the role whose ranks step environments
    learner_role: str = "main"  # the role whose ranks run learner updates

    def role(self, name: str) -> Role:
        return next(r for r in self.roles if r.name == name)

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
