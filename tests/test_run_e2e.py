"""`rlgen run` end to end: real TensorFlow, real gymnasium, real Horovod ranks (horovodrun --gloo).

Each test trains a copy of examples/ppo-cartpole.rl.yaml for a few iterations (or,
for the learning tests, a short budget) through the command line, as a user would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, drawn, rank_pid

PPO = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()
pytestmark = pytest.mark.skipif(
    not (Path(sys.executable).with_name("horovodrun")).exists(), reason="horovodrun not installed (scripts/setup.sh)"
)


def spec(tmp_path: Path, total_steps: int = 100000, stop: float | None = 475, checkpoint_every: int = 20000) -> Path:
    text = re.sub(r"total_steps: \d+", f"total_steps: {total_steps}", PPO)
    text = re.sub(r"stop: \{[^}]*\}", f"stop: {{mean_return: {stop}, window: 100}}" if stop else "stop: {}", text)
    text = re.sub(r"checkpoint: \{every: \d+", f"checkpoint: {{every: {checkpoint_every}", text)
    text = re.sub(r"eval: \{every: \d+", "eval: {every: 0", text)
    path = tmp_path / "ppo.rl.yaml"
    path.write_text(text)
    return path


def rlgen(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "rlgen", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "policy", ["single", "actors-learner", "central-inference", "pipelined-inference", "multi-learner"]
)
def test_each_policy_runs_and_writes_its_run_directory(tmp_path, policy):
    workers = 1 if policy == "single" else 2
    run_dir = tmp_path / "run"
    r = rlgen(
        "run",
        spec(tmp_path),
        "--policy",
        policy,
        "--workers",
        workers,
        "--run-dir",
        run_dir,
        "--iterations",
        4,
        "--quiet",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    rows = metrics(run_dir)
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4]
    assert rows[-1]["env_steps"] == 4 * 256
    assert rows[-1]["episodes"] > 0 and rows[-1]["mean_return"] > 0
    assert {"policy_loss", "value_loss", "entropy", "lr", "time_inference", "time_env", "time_update"} <= rows[
        -1
    ].keys()
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "finished" and doc["workers"] == workers
    assert "eval_s" not in doc  # no evaluation: nothing to say about its cost
    assert doc["threads"] == {"inter_op": 1, "intra_op": 1}  # a small update: one thread per rank
    assert (run_dir / "spec.resolved.json").is_file() and (run_dir / "plan.json").is_file()
    assert json.loads((run_dir / "plan.json").read_text())["meta"]["policy"] == policy
    assert list((run_dir / "checkpoints").glob("ckpt-1024.index"))
    assert (run_dir / "policy" / "saved_model.pb").is_file()
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert drawn(run_dir / "curves.png")[:4] == b"\x89PNG"  # drawn once the run is done
    comm_time = sum(row["time_comm"] for row in rows)
    assert (comm_time == 0) == (policy == "single")  # collectives ran exactly when the policy cuts


def test_multi_learner_ranks_end_with_equal_weights(tmp_path):
    """Each rank steps its own envs; only the gradient allreduce keeps their weights equal."""
    run_dir = tmp_path / "run"
    r = rlgen(
        "run",
        spec(tmp_path),
        "--policy",
        "multi-learner",
        "--workers",
        2,
        "--run-dir",
        run_dir,
        "--iterations",
        3,
        "--quiet",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    done = [json.loads((run_dir / "ranks" / f"{rank}.done").read_text()) for rank in (0, 1)]
    assert done[0]["weights_sha256"] == done[1]["weights_sha256"]
    assert done[0]["iteration"] == done[1]["iteration"] == 3


@pytest.mark.parametrize(("policy", "workers"), [("single", 1), ("multi-learner", 2)])
def test_agent_learns(tmp_path, policy, workers):
    """Return rises well above random play (about 22 on CartPole) within 40k steps."""
    run_dir = tmp_path / "run"
    r = rlgen(
        "run",
        spec(tmp_path, total_steps=40960, stop=None),
        "--policy",
        policy,
        "--workers",
        workers,
        "--run-dir",
        run_dir,
        "--quiet",
        cwd=tmp_path,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = metrics(run_dir)
    assert rows[0]["mean_return"] < 60
    assert rows[-1]["mean_return"] >= 150, [row["mean_return"] for row in rows[::20]]
    e = rlgen("eval", run_dir, "--episodes", 5, "--json", cwd=tmp_path)
    assert e.returncode == 0, e.stderr[-2000:]
    assert json.loads(e.stdout)["mean_return"] >= 100


def test_resume_continues_the_step_count(tmp_path):
    run_dir = tmp_path / "run"
    assert (
        rlgen("run", spec(tmp_path), "--run-dir", run_dir, "--iterations", 3, "--quiet", cwd=tmp_path).returncode == 0
    )
    first = metrics(run_dir)
    r = rlgen("run", "--resume", run_dir, "--iterations", 2, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = metrics(run_dir)
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4, 5]
    assert rows[3]["env_steps"] == first[-1]["env_steps"] + 256
    assert rows[-1]["episodes"] >= first[-1]["episodes"]
    assert json.loads((run_dir / "state.json").read_text())["env_steps"] == 5 * 256


def _wait_for_metrics(run_dir: Path, lines: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        path = run_dir / "metrics.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {lines} metric lines in {timeout} s")


def test_killed_rank_ends_the_job_with_a_clear_error(tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlgen",
            "run",
            str(spec(tmp_path, checkpoint_every=256)),
            "--policy",
            "multi-learner",
            "--workers",
            "2",
            "--run-dir",
            str(run_dir),
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_metrics(run_dir, 3)
        os.kill(rank_pid("ppo_cartpole.main", 1), signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - killed < 20
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert err.startswith("rlgen run: error: rank 1 died without reporting an error"), err
    assert err.count("\n") == 1, err  # one line: no TensorFlow log lines, no tracebacks
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    state = json.loads((run_dir / "state.json").read_text())  # the last good checkpoint stays
    assert (run_dir / "checkpoints" / f"{state['checkpoint']}.index").is_file()


def _launch(tmp_path: Path, run_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rlgen", "run", str(spec(tmp_path)), "--run-dir", str(run_dir), "--quiet", *args],
        cwd=tmp_path,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ranks_of(run_dir: Path, ranks_only: bool = False) -> list[int]:
    """pids of a run's processes: the launcher (rlgen.launch.hvdrun), its wrappers and the ranks
    (``ranks_only``: the Python rank processes), found by their command line, which names the run
    directory."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"ppo_cartpole.main" not in argv or str(run_dir).encode() not in b" ".join(argv):
                continue
            rank = b"python" in Path(argv[0].decode()).name.encode() and argv[1:3] == [b"-m", b"ppo_cartpole.main"]
            if not ranks_only or rank:
                out.append(int(pid))
    return out


@pytest.mark.parametrize(
    ("policy", "workers"), [("single", 1), ("actors-learner", 2), ("central-inference", 2), ("multi-learner", 2)]
)
def test_ctrl_c_stops_cleanly_with_a_final_checkpoint(tmp_path, policy, workers):
    run_dir = tmp_path / "run"
    proc = _launch(tmp_path, run_dir, "--policy", policy, "--workers", str(workers))
    try:
        _wait_for_metrics(run_dir, 3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "interrupted"
    state = json.loads((run_dir / "state.json").read_text())
    assert state["env_steps"] == metrics(run_dir)[-1]["env_steps"]
    assert (run_dir / "policy" / "saved_model.pb").is_file()
    assert _ranks_of(run_dir) == []


def test_killing_the_launcher_leaves_no_rank_running(tmp_path):
    run_dir = tmp_path / "run"
    proc = _launch(tmp_path, run_dir, "--policy", "multi-learner", "--workers", "2")
    try:
        _wait_for_metrics(run_dir, 2)
        assert len(_ranks_of(run_dir, ranks_only=True)) == 2
        proc.kill()  # SIGKILL: the launcher cannot clean up
        proc.wait()
        end = time.monotonic() + 30
        while _ranks_of(run_dir) and time.monotonic() < end:
            time.sleep(0.5)
        assert _ranks_of(run_dir) == []
    finally:
        for pid in _ranks_of(run_dir):
            os.kill(pid, signal.SIGKILL)


def _registered_state(run_dir):
    """The run state of the checkpoint TensorFlow registered last (``state.json`` is a copy that a
    kill between registering and copying leaves one checkpoint behind)."""
    index = (run_dir / "checkpoints" / "checkpoint").read_text()
    name = re.search(r'^model_checkpoint_path: "([^"]+)"', index, re.M).group(1)
    return json.loads((run_dir / "checkpoints" / f"{name}.state.json").read_text())


def test_resume_after_a_killed_rank_continues_from_the_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    path = spec(tmp_path, checkpoint_every=256)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlgen", "run", str(path), "--policy", "actors-learner", "--workers", "2"]
        + ["--run-dir", str(run_dir), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_metrics(run_dir, 4)
        os.kill(rank_pid("ppo_cartpole.main", 1), signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    state = _registered_state(run_dir)
    r = rlgen("run", "--resume", run_dir, "--iterations", 2, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = metrics(run_dir)
    iterations = [row["iteration"] for row in rows]
    assert iterations == sorted(set(iterations))  # redone iterations are not logged twice
    assert iterations[-1] == state["iteration"] + 2
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_dry_run_prints_the_launch_command_and_plan(tmp_path):
    r = rlgen("run", spec(tmp_path), "--policy", "central-inference", "--workers", 3, "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "-m rlgen.launch.hvdrun --gloo -np 3 -H localhost:3" in r.stdout  # horovodrun, less its Gloo check
    assert "rank 0 (localhost): role learner" in r.stdout and "rank 2 (localhost): role env" in r.stdout
    assert not (tmp_path / "runs").exists()


def test_same_spec_same_seed_gives_the_same_run(tmp_path):
    """single: a rerun with the same seed reproduces returns and losses exactly; another seed does
    not. The first run compiles its XLA programs into the (test's own, empty) cache and the rerun
    loads them: a cached program computes exactly what a fresh compile does."""
    xla = Path(os.environ["RLGEN_CACHE_DIR"]) / "xla"
    assert not xla.exists()
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        workdir = tmp_path / name
        workdir.mkdir()
        path = spec(workdir)
        path.write_text(path.read_text().replace("  seed: 0", f"  seed: {seed}"))
        r = rlgen("run", path, "--run-dir", workdir / "run", "--iterations", 6, "--quiet", cwd=workdir)
        assert r.returncode == 0, r.stderr[-2000:]
        runs[name] = [(row["mean_return"], row["policy_loss"], row["value_loss"]) for row in metrics(workdir / "run")]
        if name == "a":
            assert list(xla.glob("*/xla_compile_cache*")), "the first run kept no compiled program"
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


def test_runs_go_to_train_run_dir_and_eval_names_a_missing_env_module(tmp_path):
    """`train.run_dir` places the run; `rlgen eval` from a directory where the spec's env factory
    cannot be imported says which module and what to do (it used to report an internal error)."""
    (tmp_path / "myenvs.py").write_text("import gymnasium\n\n\ndef make():\n    return gymnasium.make('CartPole-v1')\n")
    text = spec(tmp_path).read_text().replace("  id: CartPole-v1\n", "  factory: myenvs:make\n")
    text = text.replace("  num_envs: 8", "  num_envs: 8\n  spaces: {observation: {shape: [4]}, action: {n: 2}}")
    text = text.replace("  seed: 0\n", "  seed: 0\n  run_dir: my-runs\n")
    path = tmp_path / "factory.rl.yaml"
    path.write_text(text)
    r = rlgen("run", path, "--iterations", 1, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = (tmp_path / "my-runs").iterdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    e = rlgen("eval", run_dir, "--episodes", 1, cwd=elsewhere)
    assert e.returncode == 2, e.stderr
    assert "cannot import 'myenvs:make'" in e.stderr and "PYTHONPATH" in e.stderr and "bug" not in e.stderr
    assert rlgen("eval", run_dir, "--episodes", 1, cwd=tmp_path).returncode == 0


def test_bench_marks_a_policy_the_spec_does_not_fit_as_not_applicable(tmp_path):
    r = rlgen(
        "bench",
        ROOT / "examples" / "dqn-cartpole.rl.yaml",
        "--policies",
        "single,multi-learner",
        "--iterations",
        2,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "multi-learner: not applicable: 1 envs do not split evenly" in r.stdout
    steps_row = next(line for line in r.stdout.splitlines() if line.startswith("env steps"))
    single, multi = steps_row.split()[-2:]
    assert single == "512" and multi == "n/a"


def test_the_final_policy_is_evaluated_so_the_best_is_truly_the_best(tmp_path):
    path = spec(tmp_path)
    path.write_text(re.sub(r"eval: \{every: 0", "eval: {every: 512", path.read_text()))
    run_dir = tmp_path / "run"
    r = rlgen("run", path, "--run-dir", run_dir, "--iterations", 5, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = metrics(run_dir)
    evals = [(row["eval_mean_return"], row["eval_env_steps"]) for row in rows if "eval_mean_return" in row]
    assert [steps for _, steps in evals] == [512, 1024]  # periodic: the last 256 steps are not evaluated
    doc = json.loads((run_dir / "run.json").read_text())
    final = doc["final_eval"]["mean_return"]
    assert doc["best_eval"]["mean_return"] == max([e for e, _ in evals] + [final])
    assert doc["best_eval"]["env_steps"] == (
        1280 if final > max(e for e, _ in evals) else doc["best_eval"]["env_steps"]
    )
    assert f"final eval {final:.1f}" in r.stdout  # --quiet keeps the closing line


def test_evaluation_in_its_own_process_gives_the_in_loop_results_in_fixed_rows(tmp_path):
    """The evaluator process evaluates the same snapshots as the loop would, to the same
    returns; each result lands `lead` iterations later (here 2: every 1024 steps, 256 per
    iteration) and names its snapshot. A run stopped and resumed evaluates the same snapshots
    and lands them in the same rows (the schedule is in the checkpoint)."""
    path = spec(tmp_path, total_steps=2816, stop=None, checkpoint_every=1536)
    path.write_text(re.sub(r"eval: \{every: 0", "eval: {every: 1024", path.read_text()))

    def evals(run_dir: Path) -> list[tuple]:
        keys = ("iteration", "eval_env_steps", "eval_mean_return", "eval_std_return")
        return [tuple(row.get(k) for k in keys) for row in metrics(run_dir) if "eval_mean_return" in row]

    runs = {}
    for name, env in (("loop", {"RLGEN_EVAL_PROCESS": "0"}), ("process", {})):
        run_dir = tmp_path / name
        r = subprocess.run(
            [sys.executable, "-m", "rlgen", "run", path, "--run-dir", run_dir, "--quiet"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = (evals(run_dir), json.loads((run_dir / "run.json").read_text()))
    (loop, loop_doc), (proc, proc_doc) = runs["loop"], runs["process"]
    assert [e[1:] for e in proc] == [e[1:] for e in loop] and len(proc) == 2
    assert [e[0] for e in loop] == [4, 8] and [e[0] for e in proc] == [6, 10]
    assert proc_doc["best_eval"] == loop_doc["best_eval"] and proc_doc["final_eval"] == loop_doc["final_eval"]
    assert proc_doc["eval_s"] > 0 and loop_doc["eval_s"] > 0  # what evaluating cost rank 0's loop
    assert proc_doc["eval_process"] == "forked" and "eval_process" not in loop_doc  # no second TF import
    # the process built its own copy of the policy and never failed over to the loop (which
    # would give the same results)
    assert "evaluator:" not in (tmp_path / "process" / "ranks" / "eval.log").read_text()
    assert (tmp_path / "process" / "policy-best" / "saved_model.pb").is_file()
    assert not (tmp_path / "process" / ".eval").exists()  # nothing left in flight
    part = tmp_path / "resumed"  # stopped after iteration 7, resumed from there
    assert rlgen("run", path, "--run-dir", part, "--iterations", 7, "--quiet", cwd=tmp_path).returncode == 0
    assert rlgen("run", "--resume", part, "--quiet", cwd=tmp_path).returncode == 0
    # the same snapshots, landing in the same rows (a resume restarts the envs' episodes, so its
    # returns are its own)
    assert [e[:2] for e in evals(part)] == [e[:2] for e in proc]
