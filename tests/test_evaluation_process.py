"""The evaluator process (rlgen.runtime.evaluation.process): forked from a process whose TensorFlow
has not run yet, started afresh otherwise; either way it evaluates a weight snapshot to the
returns the evaluating process itself gets, and exports the policy it evaluated. A forked
process given a builder makes its own copy of the policy (no template is exported for it);
one without, or started afresh, restores into the template. The process runs nicer than
the run (``EVAL_NICE``, or ``RLGEN_EVAL_NICE``). Each case runs in a fresh
interpreter, because whether TensorFlow has run decides how the process starts. An in-graph
env (``backend: tensorflow``) is evaluated in the graph there too."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlgen.runtime.evaluation import process

from conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "builds"

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import numpy as np
    import tensorflow as tf
    from rlgen.runtime.evaluation import process
    from rlgen.runtime.evaluation.episodes import PolicyEvaluation

    run_dir = Path(sys.argv[1])
    (run_dir / "ranks").mkdir(parents=True)
    from rlgen.runtime.networks import build_network
    from rlgen.runtime.policies import ActionSpec, Policy

    def make_policy():
        return Policy(build_network({"hidden": [8]}, (4,), 2, seed=3), ActionSpec(n=2), seed=0)

    if sys.argv[2] == "ran":
        tf.constant(1.0) + 1.0  # TensorFlow runs: a fork could not use it
    forked = process.prefork(make_policy if sys.argv[4] == "builds" else None)
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

    evaluator = process.Evaluator(run_dir, env, 4, 7, lead=1, export=export, forked=forked)
    policy.network.trainable_variables[0].assign_add(tf.ones_like(policy.network.trainable_variables[0]))
    evaluator.request(policy, 100, 1)  # the weights as they are now, not the template's
    steps, mean, _, _ = evaluator.collect()
    nicer = os.getpriority(os.PRIO_PROCESS, evaluator.proc.pid) - os.getpriority(os.PRIO_PROCESS, 0)
    evaluator.export(run_dir / "best")
    evaluator.close()
    here = PolicyEvaluation(exported.act, env, 4, 7)()
    loaded = tf.saved_model.load(str(run_dir / "best"))  # held: its variables live as long as it does
    best = PolicyEvaluation(loaded.act, env, 4, 7)()
    print(json.dumps({"started": evaluator.started, "steps": steps, "mean": mean, "here": float(here.mean()),
                      "best": float(best.mean()), "templates": len(templates), "nicer": nicer}))
    """
)


@pytest.mark.parametrize(
    "state,started,backend,builds,nice",
    [
        ("idle", "forked", "gymnasium", "builds", None),
        ("idle", "forked", "gymnasium", "template", "3"),
        ("ran", "spawned", "gymnasium", "builds", None),  # a process started afresh cannot build: the template
        ("idle", "forked", "tensorflow", "builds", "0"),
    ],
)
def test_the_evaluator_process_evaluates_a_snapshot_as_the_run_would(
    tmp_path: Path, state: str, started: str, backend: str, builds: str, nice: str | None
) -> None:
    script = [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), state, backend, builds]
    env = {k: v for k, v in os.environ.items() if k != "RLGEN_EVAL_NICE"}
    if nice is not None:
        env["RLGEN_EVAL_NICE"] = nice
    r = subprocess.run(script, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["started"] == started
    assert out["steps"] == 100 and out["mean"] == out["here"]
    assert out["best"] == out["here"]  # the exported policy is the snapshot's
    assert out["templates"] == (0 if started == "forked" and builds == "builds" else 1)
    want = process.EVAL_NICE if nice is None else int(nice)
    base = os.getpriority(os.PRIO_PROCESS, 0)  # the script's, as this process's: a suite run under nice
    assert out["nicer"] == min(19, base + want) - base  # niceness stops at 19
    assert (tmp_path / "run" / "ranks" / "eval.log").read_text() == ""  # nothing went wrong in it


@pytest.mark.parametrize("value", ["high", "-1", "20", "2.5"])
def test_a_bad_rlgen_eval_nice_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RLGEN_EVAL_NICE", value)
    with pytest.raises(ValueError, match=rf"RLGEN_EVAL_NICE='{re.escape(value)}': give a whole number from 0"):
        process.niceness()


def test_policy_of_runs_a_role_up_to_its_attach_and_no_further() -> None:
    from rlgen.runtime.evaluation.process import policy_of

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


def _role_functions(main_py: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(main_py.read_text())
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("run_")}


@pytest.mark.parametrize("main_py", sorted(GOLDEN.glob("*/*/*/main.py")), ids=lambda p: "/".join(p.parts[-4:-2]))
def test_rank_0s_role_touches_its_session_first_at_attach(main_py: Path) -> None:
    """The evaluator process builds its copy of the policy by running rank 0's role with a
    stand-in session that ends it at ``session.attach`` (``policy_of``): every generated role of
    rank 0 must only construct its fragments before that, not use the session or the channels."""
    roles = ast.literal_eval(re.search(r"^ROLES = (\{.*?\})", main_py.read_text(), re.M).group(1))
    role = _role_functions(main_py)[f"run_{roles[0]}"]
    before: list[ast.stmt] = []
    for statement in role.body:
        if "session.attach(" in ast.unparse(statement):
            break
        before.append(statement)
    else:
        pytest.fail(f"{main_py}: role {roles[0]} never attaches a policy")
    used = {n.id for s in before for n in ast.walk(s) if isinstance(n, ast.Name)}
    assert "session" not in used
    calls = [ast.unparse(n.func) for s in before for n in ast.walk(s) if isinstance(n, ast.Call)]
    assert all(name.endswith("Fragment") for name in calls), calls  # constructors only
