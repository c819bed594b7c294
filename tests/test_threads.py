"""Threads per rank: a heavy learner update takes its host's spare cores, the rest one thread."""

from __future__ import annotations

import dataclasses

import pytest

from rlgen.codegen.lower.threads import HEAVY_MACS, update_macs, widest_layer
from rlgen.runtime.session import RunConfig

from conftest import ROOT


def plan_of(example: str, policy: str = "single", workers: int = 1):
    from rlgen.api import validate_file
    from rlgen.codegen.build import build
    from rlgen.codegen.ir import from_json
    from rlgen.codegen.plan import Plan

    done = build(validate_file(ROOT / "examples" / f"{example}.rl.yaml", policy=policy, workers=workers))
    return from_json(done.files["plan.json"], Plan)


def test_widest_layer_is_the_largest_product_of_neighbours():
    assert widest_layer([17, 256, 256, 12]) == 256 * 256
    assert widest_layer([4, 64, 2]) == 256 and widest_layer([3]) == 0


@pytest.mark.parametrize(
    ("example", "macs"),
    [
        ("sac-halfcheetah", 256 * 256 * 256),  # replay batch 256 x the 256x256 layers
        ("td3-halfcheetah", 256 * 400 * 300),  # the Zoo's [400, 300] networks
        ("ppo-halfcheetah", 64 * 256 * 256),  # minibatch 64: under the line
        ("ppo-cartpole", 256 * 64 * 64),  # one minibatch of 256
        ("dqn-cartpole", 64 * 256 * 256),
    ],
)
def test_update_macs_reads_the_learner_minibatch_and_its_widest_layer(example, macs):
    plan = plan_of(example)
    assert max(update_macs(f) for f in plan.fragments) == macs
    assert plan.run.threaded_roles == (("main",) if macs >= HEAVY_MACS else ())


def test_only_the_role_that_learns_is_threaded():
    plan = plan_of("sac-halfcheetah", "actors-learner", 2)
    learning = {f.role for f in plan.fragments if any(c.kind == "sac" for c in f.components)}
    assert plan.run.threaded_roles == tuple(sorted(learning)) and len(learning) == 1
    assert {r.role for r in plan.ranks} - learning  # the actors' role is not threaded


def test_intra_op_threads_share_the_host_among_its_ranks():
    run = RunConfig(name="t", total_steps=1, steps_per_iteration=1, threaded_roles=("learner",))
    assert run.intra_op_threads("learner", cores=8, local_ranks=1) == 8
    assert run.intra_op_threads("learner", cores=8, local_ranks=3) == 2
    assert run.intra_op_threads("learner", cores=2, local_ranks=3) == 1
    assert run.intra_op_threads("actor", cores=8, local_ranks=1) == 1
    assert dataclasses.replace(run, threaded_roles=()).intra_op_threads("learner", 8, 1) == 1
