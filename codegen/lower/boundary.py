"""Lowering of transfers: which transfers travel together, and each fragment's boundary methods.

Collectives: allgathers at the same point between the same fragments share one packed
collective. Channel transfers (``send``, ``publish``) at the same point between the same
two roles share one message; the group gets a channel tag (numbered once for the whole
plan) and one fragment on each side owns its method.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlgen.codegen.ir import FDG, Fragment, Tensor, Transfer
from rlgen.codegen.plan import BoundaryPlan, MemberPlan, TensorPlan
from rlgen.codegen.policies.base import CHANNEL_OPS


def _tensor(t: Tensor) -> TensorPlan:
    return TensorPlan(t.name, t.dtype, tuple(t.shape), t.batch_axis)


#: The longest group name of joined values (a method name of it still fits a 100-column line).
LONGEST = 72


@dataclass(frozen=True)
class Group:
    """Transfers that travel together, with the fragment owning each side's method."""

    transfers: tuple[Transfer, ...]
    src: str  # owning fragment, sending side
    dst: str  # owning fragment, receiving side
    tag: int = 0  # channel tag (channel groups only)

    @property
    def first(self) -> Transfer:
        return self.transfers[0]

    @property
    def value(self) -> str:
        """The group's name in generated code (its methods are ``send_`` and ``recv_`` + it):
        its values joined, or, where that passes :data:`LONGEST` characters (several agent
        groups' results), the first and the last value with the channel's tag
        (``next_obs_adv_to_truncated_good_1``; the methods' docstrings list every value)."""
        joined = "_".join(t.value for t in self.transfers)
        if len(joined) <= LONGEST:
            return joined
        return f"{self.transfers[0].value}_to_{self.transfers[-1].value}_{self.tag}"


def transfer_groups(transfers) -> list[tuple[Transfer, ...]]:
    """Collectives that travel together: allgathers at the same point between the same
    fragments share one packed collective (see rlgen.runtime.comm.gather_packed)."""
    groups: dict[tuple, list[Transfer]] = {}
    for i, t in enumerate(transfers):
        key = (t.at, t.src, t.dst, t.op) if t.op == "allgather" else (i,)
        groups.setdefault(key, []).append(t)
    return [tuple(g) for g in groups.values()]


def plan_groups(fdg: FDG) -> list[Group]:
    """Every group of non-local transfers of the plan, in transfer order; channel groups are
    keyed by (point, roles, op) and numbered with their tags."""
    role = {f.name: f.role for f in fdg.fragments}
    kind = {f.name: f.kind for f in fdg.fragments}
    collectives = [t for t in fdg.transfers if t.op != "local" and t.op not in CHANNEL_OPS]
    out = [Group(g, g[0].src, g[0].dst) for g in transfer_groups(collectives)]
    channel: dict[tuple, list[Transfer]] = {}
    for t in fdg.transfers:
        if t.op in CHANNEL_OPS:
            channel.setdefault((t.at, role[t.src], role[t.dst], t.op), []).append(t)
    for tag, members in enumerate(channel.values(), start=1):
        # a compute fragment owns the method when the role has one (it holds the weights' version)
        src = next((t.src for t in members if kind[t.src] == "compute"), members[0].src)
        dst = next((t.dst for t in members if kind[t.dst] == "compute"), members[0].dst)
        out.append(Group(tuple(members), src, dst, tag))
    return out


def _ranks(fdg: FDG, fragment: str) -> tuple[int, ...]:
    role = fdg.fragment(fragment).role
    return tuple(r.rank for r in fdg.ranks if r.role == role)


def boundary(fdg: FDG, frag: Fragment, groups: list[Group], env_groups: int = 1) -> tuple[BoundaryPlan, ...]:
    """The fragment's boundary methods: one per transfer group whose side it owns. With
    ``env_groups`` (env cut), a channel message carries one env group's share."""
    out = []
    role_of = {r.rank: r.role for r in fdg.ranks}
    pulls = any(g.first.op == "publish" and g.dst == frag.name for g in groups)
    for g in groups:
        t = g.first
        if frag.name not in (g.src, g.dst) or t.value == "gradients":  # gradients: inside the update
            continue
        sending = g.src == frag.name
        peer = g.dst if sending else g.src
        if t.op == "broadcast":
            out.append(BoundaryPlan("sync", t.value, t.op, t.at, peer))
            continue
        if t.op == "publish":
            kind = "publish" if sending else "pull"
            out.append(BoundaryPlan(kind, t.value, t.op, t.at, peer, g.tag, _ranks(fdg, peer), lag=t.lag, mode=t.mode))
            continue
        dst_role = fdg.fragment(t.dst).role
        if t.op in CHANNEL_OPS:
            splits = tuple(fdg.fragment(t.dst).batch // env_groups for r in _ranks(fdg, t.dst))
        else:
            splits = tuple(fdg.fragment(t.dst).batch if role_of[r] == dst_role else 0 for r in sorted(role_of))
        # a channel message holds one sender's part (of one env group) for one receiver: a
        # sender with several receivers splits its envs between them
        share = fdg.fragment(t.src).batch // len(_ranks(fdg, t.dst)) // env_groups if t.op in CHANNEL_OPS else None
        members, parts, index = [], [], 0
        for member in g.transfers:
            n = len(member.payload)
            members.append(MemberPlan(member.value, n > 1, index, index + n))
            parts += [_tensor(p.with_batch(share) if share else p) for p in member.payload]
            index += n
        env_call, env_parts = _env_outputs(fdg, g, members) if not sending else (None, None)
        out.append(
            BoundaryPlan(
                kind="send" if sending else "recv",
                value=g.value,
                op=t.op,
                at=t.at,
                peer=peer,
                tag=g.tag,
                peer_ranks=_ranks(fdg, peer) if t.op in CHANNEL_OPS else (),
                # experience acted on with published weights says which version it was
                versioned=t.op in CHANNEL_OPS and (pulls if sending else _pulls(groups, g.src)),
                lag=t.lag,
                mode=t.mode,
                packed=len(g.transfers) > 1 or len(t.payload) > 1,
                multi=len(t.payload) > 1,
                members=tuple(members),
                label=", ".join(m.name for m in members),
                splits=splits,
                parts=tuple(parts),
                received=tuple(_tensor(p) for p in t.received),
                env_call=env_call,
                env_parts=env_parts,
            )
        )
    return tuple(out)


def _env_outputs(fdg: FDG, g: Group, members: list[MemberPlan]) -> tuple[str | None, tuple[int, ...] | None]:
    """A group carrying everything an env call returned (across an env cut): the call's
    method, and the parts holding its outputs in the call's order."""
    if fdg.fragment(g.src).kind != "env" or g.first.at not in {n.id for n in fdg.graph.nodes}:
        return None, None
    node = fdg.graph.node(g.first.at)
    if node.kind != "env":
        return None, None
    where = {m.name: m.start for m in members if not m.multi}
    if not all(o in where for o in node.outputs):
        return None, None
    return node.method, tuple(where[o] for o in node.outputs)


def _pulls(groups: list[Group], fragment: str) -> bool:
    return any(g.first.op == "publish" and g.dst == fragment for g in groups)
