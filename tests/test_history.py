"""The speeds a machine measured for a spec (rlgen.app.history) and ``--policy auto``'s use of them."""

from __future__ import annotations

import copy
import json
import time

import pytest

from rlgen.api import validate_file
from rlgen.app import history as hist
from rlgen.app.auto import Chooser
from rlgen.app.costmodel import Candidate
from rlgen.app.history import History, key_of, speed_of

from conftest import ROOT

SPEC = {
    "name": "s",
    "env": {"id": "CartPole-v1", "num_envs": 8},
    "components": {"learner": {"kind": "ppo", "lr": 3e-4, "epochs": 10, "minibatch": 256}},
    "deploy": {"policy": "single", "workers": 1, "hosts": []},
    "train": {"total_steps": 100_000, "seed": 0, "eval": {"every": 0}, "stop": {"mean_return": 475}},
}


def rows(steps_per_s: float, n: int = 6, per_iteration: int = 1024, spike: int | None = None) -> list[dict]:
    """Metric rows of a run at ``steps_per_s``; the first iteration (tracing) takes 3 s, and
    iteration ``spike`` (an evaluation, say) ten times as long as the others."""
    out, t = [], 3.0
    for i in range(n):
        dt = per_iteration / steps_per_s * (10 if i == spike else 1)
        t += dt if i else 0.0
        out.append(
            {
                "iteration": i + 1,
                "env_steps": (i + 1) * per_iteration,
                "time": t,
                "time_update": 0.4 * dt,
                "time_env": 0.3 * dt,
                "time_inference": 0.3 * dt,
            }
        )
    return out


def test_the_key_ignores_what_does_not_change_speed_and_keeps_what_does():
    base = key_of(SPEC, [])
    other = copy.deepcopy(SPEC)
    other["train"].update(total_steps=5, seed=7, eval={"every": 1000}, stop={})
    other["name"], other["deploy"] = "t", {"policy": "auto", "workers": 3, "hosts": []}
    assert key_of(other, []) == base
    faster = copy.deepcopy(SPEC)
    faster["env"]["num_envs"] = 16
    assert key_of(faster, []) != base
    assert key_of(SPEC, ["a:2", "b:2"]) != base
    assert key_of(SPEC, ["b:2", "a:2"]) == key_of(SPEC, ["a:2", "b:2"])


def test_speed_is_the_median_rate_after_the_first_iteration_so_an_evaluation_spike_does_not_count():
    steps_per_s, parts, per_iteration = speed_of(rows(4000.0, n=8, spike=4))
    assert steps_per_s == pytest.approx(4000.0)
    assert per_iteration == 1024 and parts["update"] == pytest.approx(0.4 * 1024 / 4000)
    assert speed_of(rows(4000.0, n=3)) is None  # too short to say


def test_rows_covering_several_short_iterations_give_speed_and_parts_per_iteration():
    one_step = rows(200.0, n=8, per_iteration=64)  # SAC-like: 64 one-step iterations a row
    for row in one_step[1:]:
        row["iterations"] = 64
    one_step[0]["iterations"] = 1  # the first iteration has a row of its own
    one_step[0]["env_steps"] = 1
    steps_per_s, parts, per_iteration = speed_of(one_step)
    assert steps_per_s == pytest.approx(200.0)
    assert per_iteration == 1 and parts["update"] == pytest.approx(0.4 * 64 / 200 / 64)
    assert speed_of(one_step[:1]) is None and speed_of(one_step[:2]) is not None  # 64 iterations are enough


def test_history_keeps_the_last_runs_forgets_old_ones_and_keeps_parts_for_single(tmp_path):
    h = History("k", tmp_path)
    for speed in (1000.0, 1100.0, 900.0, 5000.0, 5000.0, 5000.0):
        assert h.add("actors-learner", 2, rows(speed))
    assert h.add("single", 1, rows(2000.0))
    known = h.measured()
    assert known[("actors-learner", 2)].runs == hist.KEEP
    assert known[("actors-learner", 2)].steps_per_s == pytest.approx(5000.0)  # median of the last 5
    assert known[("single", 1)].parts["update"] > 0 and known[("actors-learner", 2)].parts == {}
    doc = json.loads(h.path.read_text())
    for entry in doc["measured"]["single:1"]:
        entry["at"] = time.time() - (hist.MAX_AGE_DAYS + 1) * 86400
    h.path.write_text(json.dumps(doc))
    assert ("single", 1) not in h.measured()


def _chooser(tmp_path, measure=None) -> Chooser:
    def never(c: Candidate) -> None:
        raise AssertionError(f"{c.label} measured again")

    return Chooser(
        tmp_path / "s.rl.yaml",
        [("actors-learner", 2), ("async-actors", 2), ("multi-learner", 2)],
        10**6,
        0,
        0,
        tmp_path,
        cores=2,
        note=lambda s: None,
        measure=measure or never,
        model=validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml").spec,  # what Chooser.shape reads
    )


def test_auto_starts_under_the_fastest_policy_measured_before_without_measuring_again(tmp_path):
    h = History("k", tmp_path)
    assert not _chooser(tmp_path).recall(h)  # nothing measured: profile under single as before
    h.add("single", 1, rows(2000.0))
    for policy, speed in (("actors-learner", 2600.0), ("async-actors", 3100.0), ("multi-learner", 900.0)):
        h.add(policy, 2, rows(speed))
    c = _chooser(tmp_path)
    assert c.recall(h)
    assert (c.choice.policy, c.choice.workers) == ("async-actors", 2)
    assert c.record["profile"]["from_history"] == "k" and "measured on this machine before" in c.record["why"]


def test_a_candidate_never_measured_is_measured_first_when_it_may_be_faster(tmp_path):
    h = History("k", tmp_path)
    h.add("single", 1, rows(2000.0))
    h.add("multi-learner", 2, rows(900.0))
    seen = []

    def measure(c: Candidate) -> None:
        seen.append(c.label)
        c.cost_s, c.measured, c.note = 12.0, {"actors-learner (2)": 2500.0}.get(c.label), "measured"

    c = _chooser(tmp_path, measure)
    c.budget_s = 100.0
    assert c.recall(h)
    assert "multi-learner (2)" not in seen and "actors-learner (2)" in seen
    assert (c.choice.policy, c.choice.workers) == ("actors-learner", 2)
