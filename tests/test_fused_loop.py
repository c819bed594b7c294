"""The whole loop in one graph: `single` + an in-graph env compiles each iteration into one call."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rlgen.api import validate_file, validate_text
from rlgen.codegen.build import build, fdg_of
from rlgen.codegen.passes import loop_fusion_blocker

from conftest import ROOT

INGRAPH = ROOT / "examples" / "ppo-cartpole-ingraph.rl.yaml"


def _fdg(path_or_text, policy="single", workers=None):
    if isinstance(path_or_text, str):
        result = validate_text(path_or_text, policy=policy, workers=workers)
    else:
        result = validate_file(path_or_text, policy=policy, workers=workers)
    assert result.ok, [d.message for d in result.diagnostics]
    return result, *fdg_of(result)


def test_single_with_an_in_graph_env_is_one_fragment_with_one_step_per_iteration():
    result, fdg, ctx = _fdg(INGRAPH)
    assert loop_fusion_blocker(fdg, ctx) is None
    (frag,) = fdg.fragments
    assert [(s.name, s.kind) for s in frag.steps] == [("init_env_reset", "compute"), ("iteration", "loop")]
    assert sorted(frag.nodes) == sorted(n.id for n in fdg.graph.nodes)
    assert not [t for t in fdg.transfers if t.op == "local"]
    files = build(result).files
    agent = files["ppo_cartpole_ingraph/agent.py"]
    assert "tf.while_loop(" in agent and "make_tf_env(" in agent and "GraphRolloutBuffer(" in agent
    assert "ppo_cartpole_ingraph/env.py" not in files
    main = files["ppo_cartpole_ingraph/main.py"]
    assert "metrics = agent.iteration(progress)" in main and 'clock.lap("loop")' in main


@pytest.mark.parametrize(
    ("change", "policy", "reason"),
    [
        (("  backend: tensorflow ", "  backend: gymnasium "), "single", "stepped on the host"),
        (None, "actors-learner", "several processes"),
        (
            (
                "  learn:\n    - learner.update(buffer, obs) -> metrics",
                "  learn:\n    every: 2\n    do:\n      - learner.update(buffer, obs) -> metrics",
            ),
            "single",
            "conditionally",
        ),
    ],
)
def test_what_keeps_the_loop_on_the_host(change, policy, reason):
    text = INGRAPH.read_text()
    if change:
        assert change[0] in text
        text = text.replace(*change)
    result, fdg, ctx = _fdg(text, policy=policy, workers=None if policy == "single" else 2)
    assert reason in (loop_fusion_blocker(fdg, ctx) or "")
    assert all(s.kind != "loop" for f in fdg.fragments for s in f.steps)
    build(result)  # and it still builds, on the host path


def test_graph_buffer_stores_what_the_numpy_buffer_stores():
    import tensorflow as tf

    from rlgen.runtime.buffers import RolloutBuffer
    from rlgen.runtime.graphbuffers import GraphRolloutBuffer

    t_len, b = 5, 3
    rng = np.random.default_rng(0)
    host = RolloutBuffer(t_len, b, (2,))
    graph = GraphRolloutBuffer(t_len, b, (2,))

    @tf.function(jit_compile=True)
    def fill(obs, act, rew, term, trunc, logp, val):
        def body(t, rows):
            rows = graph.insert(rows, t, obs[t], act[t], rew[t], term[t], trunc[t], logp[t], val[t])
            return t + 1, rows

        _, rows = tf.while_loop(lambda t, _: t < t_len, body, (tf.constant(0), graph.begin()))
        return graph.end(rows)

    for _ in range(3):  # episode ends carry over from one rollout to the next
        data = (
            rng.normal(size=(t_len, b, 2)).astype(np.float32),
            rng.integers(0, 2, (t_len, b)).astype(np.int32),
            rng.normal(size=(t_len, b)).astype(np.float32),
            rng.random((t_len, b)) < 0.3,
            rng.random((t_len, b)) < 0.2,
            rng.normal(size=(t_len, b)).astype(np.float32),
            rng.normal(size=(t_len, b)).astype(np.float32),
        )
        for t in range(t_len):
            host.insert(*(x[t] for x in data))
        got = fill(*data)
        for field, want, have in zip(host.rollout()._fields, host.rollout(), got, strict=True):
            np.testing.assert_array_equal(have.numpy(), want, err_msg=field)
        assert 0 < host.rollout().valid.sum() < t_len * b


def test_the_fused_loop_learns(tmp_path):
    """PPO on the in-graph CartPole, every iteration one compiled call, passes a mean return of 200."""
    spec = tmp_path / "spec.rl.yaml"
    text = INGRAPH.read_text().replace("stop: {mean_return: 475, window: 100}", "stop: {mean_return: 200, window: 100}")
    spec.write_text(text.replace("  total_steps: 100000 ", "  total_steps: 60000 "))
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "rlgen", "run", str(spec), "--run-dir", str(run_dir), "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["mean_return"] >= 200, rows[-1]
    assert rows[-1]["env_steps"] <= 60000
    assert rows[-1]["time_loop"] > 0 and rows[-1]["time_inference"] == rows[-1]["time_update"] == 0.0
