"""Rank 0's copy of every agent group's policy where each group learns on a rank of its own
(``agent-groups``): what rank 0 evaluates and exports, given the groups' weights as they are.

Rank 0 builds each group's fragment as its rank does (same networks, same seeds), and attaches
their policies as one (:class:`rlgen.runtime.policies.GroupPolicies`) with the rank of each group.
Where an evaluation is due, rank 0's verdict for the iteration asks the groups' ranks for their
policy weights (:data:`rlgen.runtime.control.FETCH`); each sends its policy's trainable variables,
and rank 0 puts them into its copy before it evaluates, so an evaluation sees exactly the weights a
run under ``single`` would (and the exported policy is the same SavedModel). The ranks run in
lockstep, so the weights are those after the iteration's update on every group. At the run's end
every group's rank sends its final weights, for the closing evaluation and ``policy/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..channels import pack, unpack
from ..control import POLICY


def _specs(variables: Sequence[Any]) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(v.shape), np.dtype(v.dtype.as_numpy_dtype).name) for v in variables]


def send_policy(mesh: Any, policy: Any) -> None:
    """A group's rank: its policy's weights to rank 0, as they are now."""
    mesh.send(0, POLICY, pack([v.numpy() for v in policy.trainable_variables]))


class PolicyCopies:
    """Rank 0's copies of the groups' policies (``policy``: a ``GroupPolicies``), each filled from
    its group's rank (``ranks``: group -> rank)."""

    def __init__(self, policy: Any, ranks: Mapping[str, int]) -> None:
        if set(ranks) != set(policy.groups):
            raise ValueError(f"ranks name the groups {sorted(ranks)}; the policy acts for {list(policy.groups)}")
        pairs = zip(policy.groups, policy.policies, strict=True)
        self.parts = [(int(ranks[g]), p.trainable_variables) for g, p in pairs]

    def fetch(self, mesh: Any) -> None:
        """Every group's weights, from its rank, into the copies (waits for them)."""
        for rank, variables in self.parts:
            payload = mesh.recv(rank, POLICY)[1]
            for v, value in zip(variables, unpack(payload, _specs(variables)), strict=True):
                v.assign(value)


class PolicyExchange:
    """Where policies learn on other ranks than the one that evaluates them (``agent-groups``):
    rank 0 holds :class:`PolicyCopies` and receives, a group's rank sends its policy. Elsewhere
    it does nothing. Called with the run's control (its ``mesh``) and whether weights move now."""

    def __init__(self, rank: int, policy: Any, ranks: Mapping[str, int] | None, groups: bool) -> None:
        self.copies = PolicyCopies(policy, ranks) if ranks is not None and rank == 0 else None
        self.sent = policy if rank != 0 and groups and policy is not None else None

    def __call__(self, control: Any, wanted: bool) -> None:
        if wanted and self.copies is not None:
            self.copies.fetch(control.mesh)
        elif wanted and self.sent is not None:
            send_policy(control.mesh, self.sent)
