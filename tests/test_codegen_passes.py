"""Each pass alone, with its invariants; and the whole pipeline for every policy."""

from __future__ import annotations

import pytest

from rlgen.api import validate_file
from rlgen.codegen.context import Context
from rlgen.codegen.graph import build_graph
from rlgen.codegen.ir import FDG, Step, from_json, to_json
from rlgen.codegen.passes import (
    can_fuse,
    check_invariants,
    cut_at_partitions,
    fuse_compute,
    insert_transfers,
    place_fragments,
    run_passes,
)
from rlgen.codegen.policies import POLICIES
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.hosts import host_of_ranks

from conftest import ROOT

PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"


def start(policy: str, workers: int, hosts=()) -> tuple[FDG, Context]:
    result = validate_file(PPO, policy=policy, workers=workers)
    assert result.ok
    spaces, _ = resolve_spaces(result.spec.env)
    pol = POLICIES[policy]
    graph = build_graph(result.spec, result.flow, spaces, result.spec.env.num_envs // pol.env_workers(workers))
    return FDG(graph, policy, workers), Context(result.spec, spaces, pol, tuple(hosts))


@pytest.mark.parametrize(
    ("policy", "workers"), [("single", 1), ("actors-learner", 3), ("central-inference", 3), ("multi-learner", 2)]
)
def test_cut_puts_every_node_in_exactly_one_fragment(policy, workers):
    fdg, ctx = start(policy, workers)
    cut = cut_at_partitions(fdg, ctx)
    assert check_invariants(cut, transfers=False) == []
    assert all(len(s.nodes) == 1 for f in cut.fragments for s in f.steps)


def test_cut_env_partition_separates_env_calls():
    fdg, ctx = start("central-inference", 3)
    cut = cut_at_partitions(fdg, ctx)
    assert {n: s for n, s in cut.sides if s == "acting"} == {"init.0": "acting", "rollout.2": "acting"}
    assert cut.partition == "env"


def test_cut_experience_partition_splits_after_the_block():
    fdg, ctx = start("actors-learner", 3)
    sides = dict(cut_at_partitions(fdg, ctx).sides)
    assert sides["rollout.3"] == "acting" and sides["learn.0"] == "learning"


@pytest.mark.parametrize(
    ("policy", "workers"), [("single", 1), ("actors-learner", 3), ("central-inference", 3), ("multi-learner", 2)]
)
def test_every_crossing_edge_has_a_transfer(policy, workers):
    fdg, ctx = start(policy, workers)
    cut = cut_at_partitions(fdg, ctx)
    moved = insert_transfers(cut, ctx)
    assert check_invariants(moved) == []
    for t in (t for t in moved.transfers if t.src != t.dst):
        local = moved.fragment(t.src).role == moved.fragment(t.dst).role
        assert (t.op == "local") == local


def test_invariant_check_catches_a_missing_transfer():
    fdg, ctx = start("central-inference", 3)
    cut = cut_at_partitions(fdg, ctx)
    assert any("without a transfer" in p for p in check_invariants(cut))


def test_fusion_merges_adjacent_compute_calls_and_keeps_their_names():
    fdg, ctx = start("single", 1)
    fused = fuse_compute(insert_transfers(cut_at_partitions(fdg, ctx), ctx), ctx)
    agent = fused.fragment("agent")
    first = agent.steps[0]
    assert first.nodes == ("rollout.0", "rollout.1")
    assert first.name == "rollout_actor_act_critic_value"
    assert first.outputs == ("action", "logp", "value")
    assert check_invariants(fused) == []


def test_can_fuse_refuses_across_blocks_and_kinds():
    fdg, _ = start("single", 1)
    act = Step("a", "compute", "rollout", ("rollout.0",), ("obs",), ("action",))
    ins = Step("b", "cpu", "rollout", ("rollout.3",), (), ())
    upd = Step("c", "compute", "learn", ("learn.0",), (), ())
    assert not can_fuse(act, ins, fdg)
    assert not can_fuse(act, upd, fdg)


def test_place_fragments_assigns_ranks_hosts_and_replicas():
    fdg, ctx = start("actors-learner", 3, hosts=("a:1", "b:2"))
    placed = place_fragments(insert_transfers(cut_at_partitions(fdg, ctx), ctx), ctx)
    assert [(r.rank, r.role, r.host) for r in placed.ranks] == [
        (0, "learner", "a"),
        (1, "actor", "b"),
        (2, "actor", "b"),
    ]
    assert placed.fragment("actor").replicas == 2 and placed.fragment("learner").replicas == 1
    assert placed.process_sets == ()  # actors and learner talk over channels, not collectives
    fdg, ctx = start("multi-learner", 2)
    placed = place_fragments(insert_transfers(cut_at_partitions(fdg, ctx), ctx), ctx)
    assert [p.ranks for p in placed.process_sets] == [(0, 1)]  # the gradient allreduce


def test_hosts_default_to_localhost():
    assert host_of_ranks((), 2) == ["localhost", "localhost"]


def test_whole_pipeline_round_trips_and_is_deterministic():
    fdg, ctx = start("central-inference", 3)
    a, b = run_passes(fdg, ctx), run_passes(fdg, ctx)
    assert to_json(a) == to_json(b)
    assert from_json(to_json(a), FDG) == a
