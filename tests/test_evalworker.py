"""The evaluator process (rlgen.runtime.evalworker): forked from a process whose TensorFlow
has not run yet, started afresh otherwise; either way it evaluates a weight snapshot to the
returns the evaluating process itself gets, and exports the policy it evaluated. A forked
process given a builder makes its own copy of the policy (no template is exported for it);
one without, or started afresh, restores into the template. Each case runs in a fresh
interpreter, because whether TensorFlow has run decides how the process starts. An in-graph
env (``backend: tensorflow``) is evaluated in the graph there too."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    from rlgen.runtime import evalworker
    from rlgen.runtime.evaluate import PolicyEvaluation

    run_dir = Path(sys.argv[1])
    (run_dir / "ranks").mkdir(parents=True)
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.policies import ActionSpec, Policy

    def make_policy():
        return Policy(build_network({"hidden": [8]}, (4,), 2, seed=3), ActionSpec(n=2), seed=0)

    if sys.argv[2] == "ran":
        tf.constant(1.0) + 1.0  # TensorFlow runs: a fork could not use it
    evalworker.prefork(make_policy if sys.argv[4] == "builds" else None)
    policy = make_policy()

    class Exported(tf.Module):
        def __init__(self):
            super().__init__()
            self.policy = policy

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def act(self, obs):
            return self.policy.act(obs, deterministic=True)[0]

    exported = Exported()
    env = {"id": "CartPole-v1", "obs_shape": [4], **({"backend": sys.argv[3]} if sys.argv[3] == "tensorflow" else {})}
    templates = []

    def export(target):
        templates.append(str(target))
        tf.saved_model.save(exported, str(target))

    evaluator = evalworker.Evaluator(run_dir, env, 4, 7, lead=1, export=export)
    policy.network.trainable_variables[0].assign_add(tf.ones_like(policy.network.trainable_variables[0]))
    evaluator.request(policy, 100, 1)  # the weights as they are now, not the template's
    steps, mean, _ = evaluator.collect()
    evaluator.export(run_dir / "best")
    evaluator.close()
    here = PolicyEvaluation(exported.act, env, 4, 7)()
    loaded = tf.saved_model.load(str(run_dir / "best"))  # held: its variables live as long as it does
    best = PolicyEvaluation(loaded.act, env, 4, 7)()
    print(json.dumps({"started": evaluator.started, "steps": steps, "mean": mean, "here": float(here.mean()),
                      "best": float(best.mean()), "templates": len(templates)}))
    """
)


@pytest.mark.parametrize(
    "state,started,backend,builds",
    [
        ("idle", "forked", "gymnasium", "builds"),
        ("idle", "forked", "gymnasium", "template"),
        ("ran", "spawned", "gymnasium", "builds"),  # a process started afresh cannot build: the template
        ("idle", "forked", "tensorflow", "builds"),
    ],
)
def test_the_evaluator_process_evaluates_a_snapshot_as_the_run_would(
    tmp_path: Path, state: str, started: str, backend: str, builds: str
) -> None:
    script = [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), state, backend, builds]
    r = subprocess.run(script, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["started"] == started
    assert out["steps"] == 100 and out["mean"] == out["here"]
    assert out["best"] == out["here"]  # the exported policy is the snapshot's
    assert out["templates"] == (0 if started == "forked" and builds == "builds" else 1)
    assert (tmp_path / "run" / "ranks" / "eval.log").read_text() == ""  # nothing went wrong in it


def test_policy_of_runs_a_role_up_to_its_attach_and_no_further() -> None:
    from rlgen.runtime.evalworker import policy_of

    built: list[str] = []

    def role(session, rank: int) -> None:  # noqa: ANN001 - the generated shape: fragments, attach, loop
        built.append(f"fragments of rank {rank}")
        session.attach(object(), policy=f"policy of rank {rank}")
        built.append("the loop ran")

    assert policy_of(role, rank=0) == "policy of rank 0"
    assert built == ["fragments of rank 0"]
    with pytest.raises(RuntimeError, match="without attaching"):
        policy_of(lambda session, rank: None)
    with pytest.raises(RuntimeError, match="no policy"):
        policy_of(lambda session, rank: session.attach(object()))
