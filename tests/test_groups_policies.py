"""Several agent groups under every distribution policy: the two-group example
(examples/mappo-simple-tag.rl.yaml: 3 adversaries and 1 good agent on mpe2's simple_tag_v3, each
group its own MAPPO) trained for real on host envs, and its generated loop under
pipelined-inference, which splits each group's rows by its own agent count."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from test_marl_run import rlgen, rows

from conftest import ROOT

pytest.importorskip("mpe2.simple_tag_v3")

EXAMPLE = ROOT / "examples" / "mappo-simple-tag.rl.yaml"
GROUPS = ("adversaries", "good")
POLICIES = [
    ("single", 1),
    ("actors-learner", 2),
    ("async-actors", 2),
    ("central-inference", 3),  # 2 env workers: each gets its own env copies' rows of each group
    ("pipelined-inference", 3),
    ("multi-learner", 2),
    ("agent-groups", 3),
]


def small(tmp_path: Path) -> Path:
    """The example on 8 env copies, 2 epochs, a checkpoint every iteration."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["env"]["num_envs"] = 8
    for name in ("learner_adv", "learner_good"):
        data["components"][name]["epochs"] = 2
    data["train"]["checkpoint"] = {"every": 200, "keep": 2}
    path = tmp_path / "tag.rl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(("policy", "workers"), POLICIES)
def test_two_groups_train_under_every_policy(tmp_path, policy, workers):
    run_dir = tmp_path / "run"
    args = ["run", small(tmp_path), "--policy", policy, "--workers", workers, "--iterations", 4]
    r = rlgen(*args, "--run-dir", run_dir, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    got = rows(run_dir)
    assert got[-1]["env_steps"] == 4 * 25 * 8  # joint env steps: 8 env copies, 25 steps an iteration
    for group in GROUPS:  # each group's learner updated every iteration, and its episodes were counted
        losses = [row[f"{group}/value_loss"] for row in got if f"{group}/value_loss" in row]
        assert len(losses) == len(got) and all(math.isfinite(x) for x in losses), (group, got[-1])
        returns = [row[f"{group}/return"] for row in got if f"{group}/return" in row]
        assert returns and all(math.isfinite(x) for x in returns), (group, got)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["iteration"] == 4


def test_pipelined_inference_slices_each_group_by_its_rows(tmp_path):
    """Each env group is half the env copies: 4 of 8, so 12 adversary rows and 4 good ones."""
    out = tmp_path / "build"
    r = rlgen("build", small(tmp_path), "--policy", "pipelined-inference", "--workers", 2, "-o", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    main = next(out.glob("*/main.py")).read_text()
    assert "obs_adv[group * 12 : (group + 1) * 12]" in main
    assert "obs_good[group * 4 : (group + 1) * 4]" in main
    worker = next(out.glob("*/env_worker.py")).read_text()
    assert "self.env.step(group, np.asarray(action_adv), np.asarray(action_good))" in worker
