"""What must hold once fragments exist, and once transfers are in."""

from __future__ import annotations

from rlgen.codegen.ir import FDG
from rlgen.codegen.passes.transfers import carry_sources, crossings


def check_invariants(fdg: FDG, transfers: bool = True) -> list[str]:
    """What must hold once fragments exist (and, with ``transfers``, once transfers are in);
    returns the violations (empty = fine)."""
    problems = []
    seen: dict[str, str] = {}
    for frag in fdg.fragments:
        for nid in frag.nodes:
            if nid in seen:
                problems.append(f"node {nid} is in fragments {seen[nid]} and {frag.name}")
            seen[nid] = frag.name
        stepped = [n for s in frag.steps for n in s.nodes]
        if sorted(stepped) != sorted(frag.nodes):
            problems.append(f"fragment {frag.name}: steps cover {stepped}, nodes are {list(frag.nodes)}")
    missing = {n.id for n in fdg.graph.nodes} - set(seen)
    problems += [f"node {n} is in no fragment" for n in sorted(missing)]
    if transfers:
        moved = {(t.value, t.src, t.dst) for t in fdg.transfers}
        for value, producer, dst, _ in crossings(fdg):
            src = fdg.fragment_of(producer).name
            if src != dst and not any(
                m[1] == src and m[2] == dst and m[0] in (value, _src_of(fdg, value)) for m in moved
            ):
                problems.append(f"value {value} crosses {src} -> {dst} without a transfer")
    return problems


def _src_of(fdg: FDG, value: str) -> str:
    return carry_sources(fdg).get(value, (value, ""))[0]
