"""``--policy auto``: the cost model, the decision, and a real run that measures and switches."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.app.auto import Chooser
from rlgen.app.costmodel import Candidate, Profile, predict, ranked
from rlgen.app.history import History, key_of
from rlgen.codegen.policies import POLICIES

from conftest import ROOT

PPO = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
HOROVOD = (Path(sys.executable).with_name("horovodrun")).exists()


def profile(**ms) -> Profile:
    parts = {k: 0.0 for k in ("inference", "env", "buffer", "update", "comm", "loop", "other")}
    parts.update({k: v / 1000 for k, v in ms.items()})
    return Profile(1024, 128, 40, parts, 1024 / sum(parts.values()))


def test_the_model_pipelines_inference_only_where_env_steps_cost_as_much_and_a_core_is_free():
    balanced = profile(inference=40, env=50, update=5)  # inference about as costly as the env
    pipelined, central = POLICIES["pipelined-inference"], POLICIES["central-inference"]
    assert predict(balanced, pipelined, 2, cores=2) > 1.1 * predict(balanced, central, 2, cores=2)
    inference_bound = profile(inference=40, env=2, update=5)  # CartPole: the second call costs more
    assert predict(inference_bound, pipelined, 2, cores=2) < predict(inference_bound, central, 2, cores=2)
    # no free core: two env workers and the learner share two cores
    assert predict(balanced, pipelined, 3, cores=2) < 1.05 * predict(balanced, pipelined, 2, cores=2)


def test_the_model_sends_an_expensive_env_to_actors_and_keeps_a_cheap_one_home():
    env_heavy = profile(inference=40, env=900, update=60)
    assert predict(env_heavy, POLICIES["actors-learner"], 3, cores=2) > 1.5 * env_heavy.steps_per_s
    assert predict(env_heavy, POLICIES["single"], 1, cores=2) == pytest.approx(env_heavy.steps_per_s)
    update_heavy = profile(inference=10, env=10, update=500)
    for name in ("actors-learner", "async-actors", "central-inference"):  # at most the acting part is hidden
        assert predict(update_heavy, POLICIES[name], 3, cores=2) <= 1.05 * update_heavy.steps_per_s
    # central inference pays a round trip per env step; lockstep actors add their parts
    lockstep = predict(env_heavy, dataclasses.replace(POLICIES["actors-learner"], lag=0), 3, cores=2)
    assert lockstep < predict(env_heavy, POLICIES["actors-learner"], 3, cores=2)
    # across hosts a round trip per env step costs more than one message per iteration
    for policy in ("central-inference", "actors-learner", "multi-learner"):
        assert predict(env_heavy, POLICIES[policy], 3, 2, network_rtt=0.005) < predict(
            env_heavy, POLICIES[policy], 3, 2
        )
    far = {
        p: predict(env_heavy, POLICIES[p], 3, cores=2, network_rtt=0.005)
        for p in ("central-inference", "actors-learner")
    }
    assert far["central-inference"] < 0.5 * far["actors-learner"]


def test_an_env_heavy_profile_measures_the_asynchronous_actors_first():
    """Ant-v5 under single (benchmarks/policy_switch.py, 2 cores): 1,536 env steps per iteration
    in 128 env calls; there the asynchronous actors (3) measured 3,424 steps/s, actors-learner (3)
    3,406, central inference (3) 2,359 and pipelined inference (3) 1,933. The candidates the
    budget lets auto measure first must be the actors', not the inference policies'."""
    parts = {"inference": 0.095, "env": 0.8356, "buffer": 0.0038, "update": 0.0445, "comm": 0.0, "loop": 0.0}
    ant = Profile(1536, 128, 40, {**parts, "other": 0.0005}, 1568.0)
    cands = [Candidate(p, w) for p in POLICIES if p != "single" for w in (2, 3)]
    for c in cands:
        c.predicted = predict(ant, POLICIES[c.policy], c.workers, cores=2)
    order = [c.label for c in ranked(cands)]
    assert order[:2] == ["async-actors (3)", "actors-learner (3)"]
    assert order.index("pipelined-inference (3)") > 1 and order.index("central-inference (3)") > 1


def test_a_tie_goes_to_the_policy_that_talks_least():
    cands = [Candidate("central-inference", 3, 1000.0), Candidate("actors-learner", 3, 990.0)]
    cands += [Candidate("async-actors", 3, 960.0), Candidate("multi-learner", 2, 800.0)]
    assert [c.policy for c in ranked(cands)] == ["async-actors", "actors-learner", "central-inference", "multi-learner"]


def records(steps_per_s: float, n: int = 4, per_iteration: int = 1024, env_share: float = 0.9) -> list[dict]:
    t = per_iteration / steps_per_s
    return [
        {
            "iteration": i + 1,
            "env_steps": per_iteration * (i + 1),
            "time": 2.0 + t * i,
            "time_env": t * env_share,
            "time_update": t * (1 - env_share),
        }
        for i in range(n)
    ]


def chooser(tmp_path: Path, measured: dict[str, float | None], total: int, budget: float | None = None) -> Chooser:
    (tmp_path / "run.json").write_text("{}")

    def measure(c: Candidate) -> None:  # the figures a measurement run would have read
        c.cost_s, c.measured = 15.0, measured.get(c.label)
        c.note = "measured" if c.measured else "failed"

    cands = [("actors-learner", 2), ("actors-learner", 3), ("central-inference", 3)]
    return Chooser(
        tmp_path / "s.rl.yaml",
        cands,
        total,
        128,
        40,
        tmp_path,
        cores=2,
        note=lambda s: None,
        measure=measure,
        budget_s=budget,
    )


def test_close_calls_are_measured_apart_and_the_fastest_measured_is_chosen_when_switching_pays(tmp_path):
    c = chooser(
        tmp_path, {"actors-learner (3)": 2600.0, "actors-learner (2)": 1050.0, "central-inference (3)": 1900.0}, 10**6
    )
    # update-bound: no candidate is predicted 1.15x single's speed, so none is tried unmeasured
    assert c.decide(records(1000.0, env_share=0.1)) is True and not c.trial
    assert (c.choice.policy, c.choice.workers) == ("actors-learner", 3)
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert doc["choice"] == {"policy": "actors-learner", "workers": 3}
    measured = [x for x in doc["candidates"] if x["measured"] is not None]
    assert measured[0]["policy"] == "single" and len(measured) >= 2
    fastest = max(x["predicted"] for x in doc["candidates"])  # the run at its best predicted speed
    assert fastest > 1000.0
    assert doc["calibration_budget_s"] == pytest.approx(0.1 * 10**6 / fastest, rel=0.01)


def test_nothing_unmeasured_is_chosen_and_a_short_run_stays_single(tmp_path):
    c = chooser(tmp_path, {"actors-learner (3)": 2600.0}, 10**6, budget=0.0)  # no time to measure
    assert c.decide(records(1000.0)) is False and c.choice.policy == "single"
    assert "calibration budget" in c.record["why"]
    c = chooser(tmp_path, {"actors-learner (3)": 1300.0}, 20_000, budget=100.0)  # 16 s left: a restart costs more
    assert c.decide(records(1000.0)) is False and c.choice.policy == "single"
    assert "would not pay back" in c.record["why"]


def test_a_candidate_predicted_much_faster_is_tried_rather_than_measured_apart(tmp_path):
    c = chooser(tmp_path, {"actors-learner (3)": 2600.0}, 10**7)
    assert c.decide(records(1000.0)) is True and c.trial
    top = ranked(c.candidates)[0]
    assert c.choice is top and top.measured is None and top.predicted >= 1.15 * 1000.0
    assert "back to single below 900 steps/s" in c.record["why"]
    assert c.trial_floor() == "900.0:8:3.0"
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert doc["trial"] == {"policy": top.policy, "workers": top.workers}  # to be tried: no figure yet
    assert doc["choice"]["policy"] == top.policy
    # it measured slower than single's profile: the run goes back to single, and says why
    c.tried((900.0, "8 iterations, 3.1 s"), kept=False, spent_s=12.0)
    assert c.choice.policy == "single" and top.measured == 900.0
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert doc["choice"] == {"policy": "single", "workers": 1} and doc["trial"]["kept"] is False
    assert "went back to single" in doc["why"] and doc["calibration_s"] >= 12.0


def test_a_kept_trial_stays_chosen_and_a_short_run_is_not_tried(tmp_path):
    c = chooser(tmp_path, {}, 10**7)
    assert c.decide(records(1000.0)) is True
    tried = c.choice
    c.tried((1800.0, "8 iterations, 3.2 s"), kept=True)
    doc = json.loads((tmp_path / "run.json").read_text())["auto"]
    assert c.choice is tried and doc["trial"] == {**doc["trial"], "steps_per_s": 1800.0, "kept": True, "measured": True}
    assert doc["trial"]["measured_over"] == "8 iterations, 3.2 s"
    c = chooser(tmp_path, {}, 20_000)  # 16 s left: trying costs a restart it cannot win back
    assert c.decide(records(1000.0)) is False and not c.trial and c.choice.policy == "single"
    c = chooser(tmp_path, {}, 10**7, budget=5.0)  # a start would cost more than the budget if the trial fails
    assert c.decide(records(1000.0)) is False and not c.trial


def test_a_trial_the_run_ended_before_it_measured_says_so_with_no_figure(tmp_path):
    c = chooser(tmp_path, {}, 10**7)
    assert c.decide(records(1000.0)) is True
    notes: list[str] = []
    c.note = notes.append
    c.tried(None, kept=True)
    trial = json.loads((tmp_path / "run.json").read_text())["auto"]["trial"]
    assert trial["measured"] is False and trial["kept"] is True and "steps_per_s" not in trial
    assert trial["note"].startswith("the run ended before the trial's measurement")
    tried = next(line for line in notes if line.startswith(c.choice.label))  # the printed table's row
    assert "tried: the run ended before the trial measured it" in tried and " - " in tried


def _rank_entry(tmp_path: Path, *args: str) -> tuple[dict, list[dict]]:
    """Build the CartPole example for single (no evaluation) and run its rank entry directly."""
    spec = tmp_path / "s.rl.yaml"
    spec.write_text(re.sub(r"eval: \{every: \d+", "eval: {every: 0", PPO))
    build = tmp_path / "build"
    if not build.exists():
        subprocess.run([sys.executable, "-m", "rlgen", "build", str(spec), "-o", str(build)], check=True)
    run_dir = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    r = subprocess.run(
        [sys.executable, "-m", "ppo_cartpole.main", "--run-dir", str(run_dir), "--quiet", *args],
        cwd=build,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(build)},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return json.loads((run_dir / "run.json").read_text()), rows


def test_a_tried_policy_slower_than_its_floor_stops_with_a_checkpoint_after_its_measuring_iterations(tmp_path):
    doc, rows = _rank_entry(tmp_path, "--iterations", "12", "--trial", "1e12:3:0")  # no policy is that fast
    assert doc["status"] == "switching" and doc["stop_reason"] == "switch"
    assert len(rows) == 5  # two iterations of warm-up (the first traces), then the 3 that measure
    assert 0 < doc["trial_steps_per_s"] < 1e12
    assert doc["env_steps"] == 5 * 256 and list((tmp_path / "run0" / "checkpoints").glob("ckpt-*.index"))
    doc, rows = _rank_entry(tmp_path, "--iterations", "12", "--trial", "1:3:0")  # every policy is that fast
    assert doc["status"] == "finished" and len(rows) == 12 and doc["trial_steps_per_s"] > 1


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_auto_run_measures_chooses_and_trains_on_with_the_choice(tmp_path):
    # 380 of the spec's 391 iterations, with no stop at the target return: the run must outlast
    # auto's 2 s profile on a quiet machine too (150 did not: at CartPole's ~75 iterations/s the
    # run ended with its profile, nothing measured)
    text = re.sub(r"stop: \{[^}]*\}", "stop: {}", re.sub(r"eval: \{every: \d+", "eval: {every: 0", PPO))
    spec = tmp_path / "tiny.rl.yaml"
    spec.write_text(text)
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", "auto", "--calibration-budget", "200"]
        + ["--iterations", "380", "--run-dir", str(run_dir), "--build-dir", str(tmp_path / "build")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((run_dir / "run.json").read_text())
    auto = doc["auto"]
    measured = {(c["policy"], c["workers"]): c["measured"] for c in auto["candidates"] if c["measured"] is not None}
    assert len(measured) >= 2  # single (the profile) and at least the candidate predicted fastest
    choice = (auto["choice"]["policy"], auto["choice"]["workers"])
    assert choice in measured
    if choice != ("single", 1):
        assert measured[choice] == max(measured.values())
    assert (doc["policy"], doc["workers"]) == choice and doc["status"] == "finished"
    assert "auto:" in r.stdout
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == list(range(1, 381))  # one run, the switch included

    # what the run measured is remembered: the next auto run of the spec starts straight under
    # the fastest measured policy, with no profile under single and no restart
    history = History(key_of(json.loads((tmp_path / "build" / "spec.resolved.json").read_text()), []))
    known = history.measured()
    assert ("single", 1) in known and known[("single", 1)].parts["update"] > 0
    assert all(key in known for key in measured if key != choice or choice == ("single", 1))
    again = tmp_path / "again"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", "auto", "--seed", "3"]
        + ["--iterations", "6", "--run-dir", str(again), "--build-dir", str(tmp_path / "build")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((again / "run.json").read_text())
    best = max(known, key=lambda k: known[k].steps_per_s)
    assert (doc["auto"]["choice"]["policy"], doc["auto"]["choice"]["workers"]) == best
    assert doc["auto"]["profile"]["from_history"] == history.key
    assert (doc["policy"], doc["workers"]) == best and doc["status"] == "finished"
    rows = [json.loads(line) for line in (again / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == list(range(1, 7))


@pytest.mark.skipif(not HOROVOD, reason="horovodrun not installed (scripts/setup.sh)")
def test_auto_tries_the_predicted_best_on_a_long_run_and_keeps_one_run(tmp_path):
    """A long run: the run goes on under the candidate predicted fastest, and keeps it or comes
    back to single after measuring it; either way one run."""
    spec = tmp_path / "s.rl.yaml"
    spec.write_text(re.sub(r"stop: \{[^}]*\}", "stop: {}", re.sub(r"eval: \{every: \d+", "eval: {every: 0", PPO)))
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(spec), "--policy", "auto"]
        + ["--set", "train.total_steps=10000000", "--iterations", "300", "--run-dir", str(run_dir)]
        + ["--build-dir", str(tmp_path / "build")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "RLGEN_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((run_dir / "run.json").read_text())
    auto = doc["auto"]
    trial = auto["trial"]
    assert auto["calibration_s"] < 60
    if not trial["measured"]:  # a loaded machine: the run ended before the trial's window; it says so
        assert trial["kept"] and "steps_per_s" not in trial and trial["note"]
        return
    assert trial["steps_per_s"] > 0 and trial["measured_over"]
    tried = (trial["policy"], trial["workers"])
    assert tried != ("single", 1)
    single = auto["candidates"][0]["measured"]
    if trial["kept"]:
        assert trial["steps_per_s"] >= 0.9 * single and (doc["policy"], doc["workers"]) == tried
    else:
        assert trial["steps_per_s"] < 0.9 * single and (doc["policy"], doc["workers"]) == ("single", 1)
        assert "went back to single" in auto["why"]
    assert doc["status"] == "finished"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == list(range(1, 301))  # one run: profile, trial and the rest
