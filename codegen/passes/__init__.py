"""Graph rewrites from the dataflow graph to the placed FDG: an ordered list of small pure passes.

Each pass takes an :class:`~rlgen.codegen.ir.FDG` and a :class:`Context` and
returns a new FDG; :func:`check_invariants` states what must hold after each.

1. :func:`cut_at_partitions` — every node gets a side of the policy's cut and a
   fragment (env stepping apart from compute, one fragment per role and kind);
2. :func:`insert_transfers` — every value crossing fragments gets a transfer:
   a local hand-over inside a process, or the policy's collective between roles;
3. :func:`fuse_compute` — adjacent compute calls of a fragment become one step
   (one ``tf.function``) when :func:`can_fuse` says so; fused steps keep the calls' names;
4. :func:`fuse_loop` — under ``single`` with an in-graph env, the env joins the compute
   fragment and a whole iteration becomes one step (one ``tf.function``) when
   :func:`loop_fusion_blocker` finds nothing against it;
5. :func:`place_fragments` — ranks, hosts, replicas and process sets.

One module a pass (``cut``, ``transfers``, ``fuse``, ``place``); what they share is in
:mod:`rlgen.codegen.context` and :mod:`rlgen.codegen.weights`.
"""

from __future__ import annotations

from rlgen.codegen.context import Context, Pass
from rlgen.codegen.ir import FDG
from rlgen.codegen.passes.cut import cut_at_partitions
from rlgen.codegen.passes.fuse import can_fuse, fuse_compute, fuse_loop, loop_fusion_blocker
from rlgen.codegen.passes.invariants import check_invariants
from rlgen.codegen.passes.place import place_fragments
from rlgen.codegen.passes.transfers import insert_transfers

__all__ = [
    "PASSES",
    "can_fuse",
    "check_invariants",
    "cut_at_partitions",
    "fuse_compute",
    "fuse_loop",
    "insert_transfers",
    "loop_fusion_blocker",
    "place_fragments",
    "run_passes",
]

PASSES: tuple[Pass, ...] = (cut_at_partitions, insert_transfers, fuse_compute, fuse_loop, place_fragments)


def run_passes(fdg: FDG, ctx: Context, passes: tuple[Pass, ...] = PASSES) -> FDG:
    for p in passes:
        fdg = p(fdg, ctx)
    return fdg
