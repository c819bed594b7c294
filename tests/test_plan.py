"""The lowered plan: it round-trips through plan.json, and rendering plan.json alone gives the build."""

from __future__ import annotations

import dataclasses
import json

import pytest
from buildcases import CASES, IDS

from rlgen.codegen.build import build, formatted, render_plan
from rlgen.codegen.ir import from_json, to_json
from rlgen.codegen.plan import Plan, RunPlan
from rlgen.runtime.session import RunConfig


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_plan_json_alone_renders_the_build(example, policy, workers):
    from rlgen.api import validate_file

    done = build(validate_file(example, policy=policy, workers=workers))
    plan = from_json(done.files["plan.json"], Plan)
    assert to_json(plan, sort_keys=False) == done.files["plan.json"]
    again = formatted(render_plan(plan))
    generated = {k: v for k, v in done.files.items() if k.endswith(".py") or k in ("plan.json", "ruff.toml")}
    assert again == generated


def test_the_run_plan_is_what_the_runtime_takes():
    """RunPlan's fields are RunConfig's keyword arguments (metric names come from the learner)."""
    plan_fields = [f.name for f in dataclasses.fields(RunPlan)]
    config_fields = [f.name for f in dataclasses.fields(RunConfig) if f.name != "metric_names"]
    assert sorted(plan_fields) == sorted(config_fields)


def test_plan_json_says_policy_workers_and_every_rank(tmp_path):
    from rlgen.api import validate_file

    from conftest import ROOT

    result = validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml", policy="actors-learner", workers=3)
    doc = json.loads(build(result).files["plan.json"])
    assert doc["meta"]["policy"] == "actors-learner" and doc["meta"]["workers"] == 3
    assert [r["role"] for r in doc["ranks"]] == ["learner", "actor", "actor"]
    learner = next(f for f in doc["fragments"] if f["name"] == "learner")
    update = next(s for s in learner["steps"] if s["name"] == "learn_learner_update")
    ppo = next(c for c in learner["components"] if c["kind"] == "ppo")
    assert ppo["options"]["config"]["epochs"] == 20 and ppo["options"]["steps"] == 32
    assert [t["shape"] for t in update["signature"]][0] == [32, 8, 4]  # all 8 envs reach the learner


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_both_ends_of_every_channel_agree_on_the_message(example, policy, workers):
    """What one sender sends one receiver (its share of the envs when it splits them) is what the
    receiver unpacks per message: same tag, dtypes and shapes; a split share holds whole env
    copies (``k`` rows each where agents are folded into the rows)."""
    from rlgen.api import validate_file

    plan = from_json(build(validate_file(example, policy=policy, workers=workers)).files["plan.json"], Plan)
    ends: dict[int, dict[str, object]] = {}
    for frag in plan.fragments:
        for b in frag.boundary:
            if b.tag and b.kind in ("send", "recv"):
                ends.setdefault(b.tag, {})[b.kind] = b
    for tag, pair in ends.items():
        send, recv = pair["send"], pair["recv"]
        shapes = [list(p.shape) for p in send.parts]
        if len(send.peer_ranks) > 1:  # split along each part's env axis: the receiver's envs' rows
            assert len(set(send.splits)) == 1 and send.splits == recv.splits, f"tag {tag}"
            for shape, part in zip(shapes, send.parts, strict=True):
                if part.axis is not None:
                    assert shape[part.axis] % send.splits[0] == 0, f"tag {tag}: {part.name}"
        assert shapes == [list(p.shape) for p in recv.parts], f"tag {tag}: {send.value}"
        assert [p.dtype for p in send.parts] == [p.dtype for p in recv.parts]
