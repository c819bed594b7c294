"""The session's checkpoints and resume, in one process with a small real TensorFlow module."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from rlgen.runtime.session import RunConfig, Session  # noqa: E402

CONFIG = RunConfig(name="t", total_steps=10_000, steps_per_iteration=100, checkpoint_every=100, checkpoint_keep=3)


class Agent(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(0.0)


def _train(run_dir: Path, iterations: int, resume: bool = False, config: RunConfig = CONFIG) -> tuple[Session, Agent]:
    session = Session(config, run_dir, resume=resume, max_iterations=iterations)
    agent = Agent()
    session.attach(agent)
    for i in session.iterations():
        agent.w.assign(float(i + 1))
        session.end_iteration(episodes=[(float(i), 10)])
    session.finish()
    return session, agent


def _rows(run_dir: Path) -> list[int]:
    return [json.loads(line)["iteration"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_resume_restores_weights_and_state_and_drops_redone_metric_rows(tmp_path):
    _train(tmp_path, 4)
    # a kill after iteration 5's metrics but before its checkpoint: the row is redone on resume
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"iteration": 5, "env_steps": 500}) + "\n")
    session, agent = _train(tmp_path, 2, resume=True)
    assert session.start_iteration == 4 and agent.w.numpy() == 6.0
    assert _rows(tmp_path) == [1, 2, 3, 4, 5, 6]
    assert session.episodes.count == 6


def test_one_step_iterations_share_rows_that_end_at_checkpoints_and_resume_in_step(tmp_path):
    config = RunConfig(name="t", total_steps=10_000, steps_per_iteration=1, checkpoint_every=100, checkpoint_keep=3)
    _train(tmp_path, 250, config=config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # 64 one-step iterations a row; the first alone; a row ends at each checkpoint and at the end
    assert [(r["iteration"], r["iterations"]) for r in rows] == [
        (1, 1),
        (65, 64),
        (100, 35),
        (164, 64),
        (200, 36),
        (250, 50),
    ]
    assert rows[2]["env_steps"] == 100 and rows[2]["episodes"] == 100
    # a kill after iteration 260's row but before its checkpoint: the row is redone on resume
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"iteration": 260, "env_steps": 260, "iterations": 10}) + "\n")
    session, agent = _train(tmp_path, 30, resume=True, config=config)
    assert session.start_iteration == 250 and agent.w.numpy() == 280.0
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["iterations"]) for r in rows[-2:]] == [(251, 1), (280, 29)]
    assert sum(r["iterations"] for r in rows) == 280


def test_tensorboard_gets_every_log_every_th_row_with_the_rows_values(tmp_path):
    config = RunConfig(name="t", total_steps=10_000, steps_per_iteration=1, checkpoint_every=0, log_every=2)
    _train(tmp_path, 300, config=config)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iterations"] for r in rows] == [1, 64, 64, 64, 64, 43]  # the last ends the run
    written = {}
    for path in (tmp_path / "tensorboard").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "mean_return":
                    written[event.step] = float(tf.make_ndarray(value.tensor))
    # rows 2 and 4 (every second one), and the last (the run ends there), at their env steps
    assert sorted(written) == [rows[1]["env_steps"], rows[3]["env_steps"], rows[5]["env_steps"]]
    assert written[rows[3]["env_steps"]] == pytest.approx(rows[3]["mean_return"])


def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    _train(tmp_path, 3)
    newest = tmp_path / "checkpoints" / "ckpt-300.index"
    newest.write_bytes(b"garbage")
    session, agent = _train(tmp_path, 1, resume=True)
    assert session.start_iteration == 2 and agent.w.numpy() == 3.0


def test_a_checkpoint_without_its_run_state_is_not_used(tmp_path):
    _train(tmp_path, 3)
    (tmp_path / "checkpoints" / "ckpt-300.state.json").write_text("{}")
    session, _ = _train(tmp_path, 1, resume=True)
    assert session.start_iteration == 2


def test_no_intact_checkpoint_is_a_clear_error(tmp_path):
    _train(tmp_path, 1)
    for path in (tmp_path / "checkpoints").glob("*.state.json"):
        path.unlink()
    from rlgen.runtime.checkpoints import NoCheckpoint

    with pytest.raises(NoCheckpoint, match=r"no intact checkpoint .*ckpt-100 \(no run state\) unusable"):
        _train(tmp_path, 1, resume=True)
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "damaged").iterdir())[0].startswith("ckpt-100")


def test_only_the_kept_checkpoints_keep_their_state_files(tmp_path):
    _train(tmp_path, 5)
    states = sorted(p.name for p in (tmp_path / "checkpoints").glob("*.state.json"))
    assert states == ["ckpt-300.state.json", "ckpt-400.state.json", "ckpt-500.state.json"]
    assert json.loads((tmp_path / "state.json").read_text())["checkpoint"] == "ckpt-500"


def _fired(run_dir: Path, iterations: int, every_steps: int, resume: bool = False) -> list[int]:
    session = Session(CONFIG, run_dir, resume=resume, max_iterations=iterations)
    session.attach(Agent())
    fired = []
    for i in session.iterations():
        if session.passes(every_steps):
            fired.append(i)
        session.end_iteration()
    session.finish()
    return fired


def test_every_steps_fires_in_the_iterations_that_pass_a_multiple_and_resumes_in_step(tmp_path):
    """100 env steps per iteration: every 250 steps is passed in iterations 2, 4, 7, 9, ... (steps
    200-300, 400-500, 700-800, 900-1000); every 30 steps, in every iteration; after a resume,
    where the uninterrupted run would have fired."""
    assert _fired(tmp_path / "a", 10, 250) == [2, 4, 7, 9]
    assert _fired(tmp_path / "b", 5, 30) == [0, 1, 2, 3, 4]
    _fired(tmp_path / "c", 3, 250)
    assert _fired(tmp_path / "c", 7, 250, resume=True) == [4, 7, 9]


def test_a_resumed_run_keeps_the_kept_count_and_deletes_older_checkpoints(tmp_path):
    _train(tmp_path, 5)  # ckpt-300, 400 and 500 kept
    _train(tmp_path, 2, resume=True)  # from 500: 600 and 700
    ckpts = tmp_path / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("*.state.json")) == [
        "ckpt-500.state.json",
        "ckpt-600.state.json",
        "ckpt-700.state.json",
    ]
    assert sorted(p.name for p in ckpts.glob("*.index")) == ["ckpt-500.index", "ckpt-600.index", "ckpt-700.index"]
    # and each of them is still a resume point: the newest damaged, the one before stands in
    (ckpts / "ckpt-700.index").write_bytes(b"garbage")
    session, agent = _train(tmp_path, 1, resume=True)
    assert session.start_iteration == 6 and agent.w.numpy() == 7.0


def _group_checkpoints(run_dir: Path, steps: list[int], missing: dict[str, int] = {}) -> None:  # noqa: B006
    """Rank 0's run states and two groups' learners saved at ``steps`` (less ``missing``'s)."""
    from rlgen.runtime.checkpoints import Checkpoints
    from rlgen.runtime.rundir import RunDir

    rd = RunDir(run_dir)
    rank0 = Checkpoints(rd, None, keep=3, groups=("adv", "good"))
    groups = {}
    for g in ("adv", "good"):
        agent = Agent()
        groups[g] = (agent, Checkpoints(rd, agent, keep=3, group=g))
    for i, s in enumerate(steps, start=1):
        rank0.save(i, s, {"iteration": i, "env_steps": s})
        for g, (agent, ckpts) in groups.items():
            agent.w.assign(float(s))
            if missing.get(g) != s:
                ckpts.save(i, s, {"iteration": i, "env_steps": s})


def test_agent_groups_resume_at_the_newest_steps_every_group_saved(tmp_path):
    from rlgen.runtime.checkpoints import Checkpoints, NoCheckpoint
    from rlgen.runtime.rundir import RunDir

    _group_checkpoints(tmp_path, [100, 200, 300], missing={"good": 300})  # `good` died saving 300
    assert json.loads((tmp_path / "state.json").read_text())["env_steps"] == 300  # rank 0's, not a group's
    rd = RunDir(tmp_path)
    path, state = Checkpoints(rd, None, keep=3, groups=("adv", "good")).restore(lambda _: None)
    assert path.endswith("ckpt-200") and state["iteration"] == 2
    for g in ("adv", "good"):
        agent = Agent()
        Checkpoints(rd, agent, keep=3, group=g).restore_at(2, 200)
        assert agent.w.numpy() == 200.0
    with pytest.raises(NoCheckpoint, match=r"group good's checkpoint .*ckpt-300 at 300 env steps: missing"):
        Checkpoints(rd, Agent(), keep=3, group="good").restore_at(3, 300)
    # adv's ckpt-300 lies past the resume point: it went with the restore (its steps are redone)
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "adv").glob("ckpt-*")) == [
        "ckpt-100.data-00000-of-00001",
        "ckpt-100.index",
        "ckpt-100.state.json",
        "ckpt-200.data-00000-of-00001",
        "ckpt-200.index",
        "ckpt-200.state.json",
    ]
