"""`env: {backend: tensorflow}`: validated, built (env fragments, or one fused graph under
`single`), and trained under several policies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.api import validate_text

from conftest import ROOT

PPO = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
TF_PPO = PPO.replace("  num_envs: 8 ", "  backend: tensorflow\n  num_envs: 8 ", 1)


def test_the_spec_is_valid_and_kwargs_are_refused():
    assert "backend: tensorflow" in TF_PPO
    assert validate_text(TF_PPO).ok
    bad = validate_text(
        TF_PPO.replace("  backend: tensorflow\n", "  backend: tensorflow\n  kwargs: {render_mode: human}\n")
    )
    assert [d.code for d in bad.diagnostics if d.severity == "error"] == ["E407"]


@pytest.mark.skipif(not Path(sys.executable).with_name("horovodrun").exists(), reason="needs scripts/setup.sh")
@pytest.mark.parametrize(("policy", "workers"), [("single", 1), ("central-inference", 2)])
def test_runs_with_the_in_graph_env(tmp_path, policy, workers):
    spec = tmp_path / "ppo-tf.rl.yaml"
    spec.write_text(TF_PPO)
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlgen",
            "run",
            str(spec),
            "--policy",
            policy,
            "--workers",
            str(workers),
            "--run-dir",
            str(run_dir),
            "--iterations",
            "4",
            "--quiet",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    package = next((run_dir / "build").glob("*/ppo_cartpole"))  # the build the run ran, in its directory
    if policy == "single":  # the whole iteration is one compiled graph: no env fragment
        assert not list(package.glob("env*.py"))
        assert "tf.while_loop(" in (package / "agent.py").read_text()
    else:  # env fragments step the in-graph env from the host
        env_module = next(package.glob("env*.py")).read_text()
        assert "HostTFEnv(" in env_module and "VectorEnv(" not in env_module
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[-1]["episodes"] > 0
    assert 8 <= rows[-1]["mean_return"] <= 100  # random-ish CartPole play, counted through the in-graph env
