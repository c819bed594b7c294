"""What runs report, as a user reads it: rows that carry only the algorithm's own metrics, the
closing evaluation whichever evaluation it was, ``rlgen eval``'s output, and ``rlgen bench``'s
time per part of every role."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

RLGEN = Path(sys.executable).with_name("rlgen")
pytestmark = pytest.mark.skipif(
    not Path(sys.executable).with_name("horovodrun").exists(), reason="horovodrun not installed (scripts/setup.sh)"
)


def rlgen(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [str(RLGEN), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a2c_rows_carry_no_ppo_clip_statistics_and_the_last_periodic_evaluation_is_the_closing_one(tmp_path):
    """A2C's iterations are 40 env steps (8 envs x 5): with evaluation every 200 steps and 400 in
    all, the last periodic evaluation is of the final policy: run.json and the closing line
    report it as the final evaluation."""
    spec = ROOT / "examples" / "a2c-cartpole.rl.yaml"
    sets = ["--set", "train.total_steps=400", "--set", "train.eval.every=200", "--set", "train.stop={}"]
    r = rlgen("run", spec, *sets, "--run-dir", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    logged = rows(tmp_path / "run")
    assert [row["iteration"] for row in logged] == list(range(1, 11))  # 40-step iterations: a row each
    learned = [row for row in logged if "policy_loss" in row]
    assert learned and not any({"clip", "approx_kl", "clip_fraction"} & row.keys() for row in learned)
    assert {"value_loss", "entropy", "lr", "explained_variance"} <= learned[-1].keys()
    evals = [row["eval_env_steps"] for row in logged if "eval_env_steps" in row]
    assert evals == [200, 400]
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    last = next(row for row in reversed(logged) if "eval_mean_return" in row)
    assert doc["final_eval"] == {"mean_return": last["eval_mean_return"], "std": last["eval_std_return"]}
    assert f"final eval {last['eval_mean_return']:.1f}" in r.stdout


def test_eval_prints_whole_lines_and_says_when_the_best_policy_is_the_final_one(tmp_path):
    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    sets = ["--set", "train.total_steps=768", "--set", "train.eval.every=256"]
    assert rlgen("run", spec, *sets, "--run-dir", "run", "--quiet", cwd=tmp_path).returncode == 0
    r = rlgen("eval", "run", "--json", "--episodes", 3, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.endswith("}\n")
    assert set(json.loads(r.stdout)) == {"episodes", "mean_return", "std_return", "min", "max"}
    r = rlgen("eval", "run", "--best", "--episodes", 3, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    best = json.loads((tmp_path / "run" / "run.json").read_text())["best_eval"]["env_steps"]
    note = r.stdout.splitlines()[1]
    if best == 768:
        assert note == "(the best evaluated policy is the final one, at 768 env steps: rlgen eval shows the same)"
    else:
        assert note == f"(the best evaluated policy, from {best:,} env steps)"
    r = rlgen("eval", "run", "--best", "--json", "--episodes", 3, cwd=tmp_path)
    doc = json.loads(r.stdout)
    assert doc["best_env_steps"] == best and doc["best_is_final"] == (best == 768) and doc["policy"] == "policy-best"


def test_bench_shows_the_other_ranks_time_per_part(tmp_path):
    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    r = rlgen("bench", spec, "--policies", "single,actors-learner", "--iterations", 6, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {line.split("  ")[0].strip(): line.split()[-2:] for line in r.stdout.splitlines() if "  " in line}
    single_env, learner_env = lines["ms/iteration env"]
    assert float(single_env) > 0 and float(learner_env) == 0  # the learner steps no env...
    single_rest, actors_env = lines["other ranks: env"]
    assert single_rest == "-" and float(actors_env) > 0  # ...its actors do, and the table shows it
    assert re.search(r"other ranks: inference\s+-\s+\d", r.stdout)
