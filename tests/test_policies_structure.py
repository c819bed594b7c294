"""The four policies give structurally different builds (what a reviewer would check by eye)."""

from __future__ import annotations

import json

from buildcases import build_case

from rlgen.api import validate_file

from conftest import ROOT

PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"


def _build(policy, workers):
    return build_case(PPO, policy, workers)


def test_single_has_no_collectives():
    b = _build("single", 1)
    assert all(t.op == "local" for t in b.fdg.transfers)
    assert "comm." not in "".join(b.files.values())
    assert [r.rank for r in b.fdg.ranks] == [0]


def test_central_inference_env_worker_has_no_networks_and_actions_and_steps_travel_one_way():
    b = _build("central-inference", 3)
    env = b.files["ppo_cartpole/env_worker.py"]
    assert "tensorflow" not in env and "build_network" not in env and "tf.Variable" not in env
    learner = b.files["ppo_cartpole/learner.py"]
    assert "def recv_obs" in learner and "p2p.gather(" in learner and "comm." not in learner
    assert "def send_action" in learner and "splits=[4, 4]" in learner  # each env worker gets its 4 envs' actions
    ops = {(t.value, t.op, t.src, t.dst) for t in b.fdg.transfers}
    assert ("next_obs", "send", "env_worker", "learner") in ops
    assert ("action", "send", "learner", "env_worker") in ops
    gathered = next(t for t in b.fdg.transfers if t.value == "next_obs")
    assert gathered.payload[0].shape == (4, 4) and gathered.received[0].shape == (8, 4)


def test_actors_learner_actors_send_rollouts_one_way_and_take_weights_at_most_lag_old():
    b = _build("actors-learner", 3)
    actor = b.files["ppo_cartpole/actor.py"]
    assert "def send_obs_buffer" in actor and "header=self.weights_version" in actor and "def pull_weights" in actor
    learner = b.files["ppo_cartpole/learner.py"]
    assert "def recv_obs_buffer" in learner and "def publish_weights" in learner
    ops = {(t.value, t.op, t.src, t.dst, t.lag) for t in b.fdg.transfers if t.op != "local"}
    assert ("buffer", "send", "actor", "learner", 0) in ops
    assert ("weights", "publish", "learner", "actor", 1) in ops  # the policy's default lag
    main = b.files["ppo_cartpole/main.py"]
    assert "actor.pull_weights(iteration - 1)" in main and "learner.publish_weights(iteration + 1)" in main
    assert "policy_lag=iteration - learner.behaviour_version" in main
    assert {r.role for r in b.fdg.ranks if r.rank > 0} == {"actor"}
    plan = json.loads(b.files["plan.json"])
    assert next(r for r in plan["roles"] if r["role"] == "actor")["begin"][0]["lag"] == 1


def test_deploy_lag_zero_makes_actors_wait_for_every_update(tmp_path):
    spec = tmp_path / "lockstep.rl.yaml"
    spec.write_text(PPO.read_text().replace("  policy: single", "  policy: actors-learner\n  workers: 2\n  lag: 0"))
    main = build_case(spec, "actors-learner", 2).files["ppo_cartpole/main.py"]
    assert "actor.pull_weights(iteration - 0)" in main


def test_multi_learner_every_rank_learns_with_an_allreduce_of_gradients():
    b = _build("multi-learner", 2)
    assert all("worker" in r.fragments for r in b.fdg.ranks)
    worker = b.files["ppo_cartpole/worker.py"]
    assert "reduce_gradients=comm.allreduce_gradients" in worker
    ops = {(t.value, t.op) for t in b.fdg.transfers}
    assert ("gradients", "allreduce") in ops and ("weights", "broadcast") in ops
    # minibatch is split over the learners
    assert '"minibatch": 128' in worker


def test_a_policy_without_its_partition_is_refused_with_the_partition_to_add(tmp_path):
    text = PPO.read_text().split("partitions:")[0] + "train:" + PPO.read_text().split("train:")[1]
    spec = tmp_path / "nopart.rl.yaml"
    spec.write_text(text)
    result = validate_file(spec, policy="actors-learner", workers=3)
    messages = [d.message + " " + (d.hint or "") for d in result.diagnostics]
    assert any("experience partition" in m and "after: rollout" in m for m in messages), messages


def test_weights_are_published_every_iteration_even_when_the_last_block_is_conditional():
    """DQN's learn block runs only after `after:` steps; actors waiting for weights must still get them."""
    main = build_case(ROOT / "examples" / "dqn-cartpole.rl.yaml", "actors-learner", 2).files["dqn_cartpole/main.py"]
    publish = next(line for line in main.splitlines() if ".publish_weights(iteration + 1)" in line)
    assert publish.startswith("        learner.publish_weights")  # loop body level, not inside `if ...:`
