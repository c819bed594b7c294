"""Lowering of transfers: which transfers travel together, and each fragment's boundary methods."""

from __future__ import annotations

from rlgen.codegen.ir import FDG, Fragment, Tensor, Transfer
from rlgen.codegen.plan import BoundaryPlan, MemberPlan, TensorPlan


def _tensor(t: Tensor) -> TensorPlan:
    return TensorPlan(t.name, t.dtype, tuple(t.shape), t.batch_axis)


def transfer_groups(transfers) -> list[tuple[Transfer, ...]]:
    """Transfers that travel together: allgathers at the same point between the same
    fragments share one packed collective (see rlgen.runtime.comm.gather_packed)."""
    groups: dict[tuple, list[Transfer]] = {}
    for i, t in enumerate(transfers):
        key = (t.at, t.src, t.dst, t.op) if t.op == "allgather" else (i,)
        groups.setdefault(key, []).append(t)
    return [tuple(g) for g in groups.values()]


def boundary(fdg: FDG, frag: Fragment) -> tuple[BoundaryPlan, ...]:
    """The fragment's ``send_*``/``recv_*``/``sync_*`` methods, one per transfer group it takes part in."""
    out = []
    role_of = {r.rank: r.role for r in fdg.ranks}
    mine = [t for t in fdg.transfers if t.op != "local" and frag.name in (t.src, t.dst)]
    for group in transfer_groups(mine):
        t = group[0]
        if t.op == "broadcast":
            peer = t.src if t.dst == frag.name else t.dst
            out.append(BoundaryPlan("sync", t.value, t.op, t.at, peer))
            continue
        if t.value == "gradients":  # reduced inside the learner's compiled update
            continue
        dst_role = fdg.fragment(t.dst).role
        splits = tuple(fdg.fragment(t.dst).batch if role_of[r] == dst_role else 0 for r in sorted(role_of))
        direction = "send" if t.src == frag.name else "recv"
        members, parts, index = [], [], 0
        for member in group:
            n = len(member.payload)
            members.append(MemberPlan(member.value, n > 1, index, index + n))
            parts += [_tensor(p) for p in member.payload]
            index += n
        out.append(
            BoundaryPlan(
                kind=direction,
                value="_".join(m.name for m in members),
                op=t.op,
                at=t.at,
                peer=t.dst if direction == "send" else t.src,
                packed=len(group) > 1 or len(t.payload) > 1,
                multi=len(t.payload) > 1,
                members=tuple(members),
                label=", ".join(m.name for m in members),
                splits=splits,
                parts=tuple(parts),
                received=tuple(_tensor(p) for p in t.received),
            )
        )
    return tuple(out)
