"""``rlgen tune``: the search space checked like a spec, real trials, the best spec, the same samples per seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlgen.api import validate_file
from rlgen.dsl.overrides import parse_path
from rlgen.dsl.tunespace import check_space

from conftest import ROOT

PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"
#: Seconds per trial: four iterations, two evaluations of three episodes, one or two PPO epochs.
TINY = ["--set", "train.total_steps=1024", "--set", "train.eval.every=512", "--set", "train.eval.episodes=3"]
SPACE = """\
objective: eval_mean_return
space:
  components.learner.lr.start: {low: 1.0e-4, high: 3.0e-3, log: true}
  components.learner.clip.start: {low: 0.1, high: 0.3}
  components.learner.epochs: {choices: [1, 2]}
"""


def rlgen(*args, cwd=ROOT, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlgen", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **env},
        timeout=300,
    )


def check(tmp_path: Path, text: str, spec: Path = PPO):
    space = tmp_path / "space.tune.yaml"
    space.write_text(textwrap.dedent(text))
    return check_space(space, validate_file(spec).spec, lambda s: validate_file(spec, settings=[s]))


def test_the_example_space_is_valid() -> None:
    checked = check_space(
        ROOT / "examples" / "ppo-cartpole.tune.yaml",
        validate_file(PPO).spec,
        lambda s: validate_file(PPO, settings=[s]),
    )
    assert checked.ok, checked.diagnostics
    assert [p.name for p in checked.space.params][-1] == "env.num_envs" and checked.space.params[-1].integer


@pytest.mark.parametrize(
    ("entry", "code", "column", "message"),
    [
        ("components.learner.gama: {low: 0.9, high: 0.99}", "E805", 3, "unknown key 'gama' (did you mean 'gamma'?)"),
        ("train.seed.x: {low: 1, high: 2}", "E805", 3, "train.seed is a number, which has no 'x'"),
        ("components.learner.gamma: {low: 0.99, high: 0.9}", "E801", 47, "high 0.9 is not greater than low 0.99"),
        ("components.learner.lr.start: {low: 0, high: 1.0e-3, log: true}", "E802", 38, "a log range needs low > 0"),
        ("env.num_envs: {low: 8, high: 30, step: 8}", "E803", 32, "not low plus a multiple of step 8"),
        ("components.learner.epochs: {choices: [5, 0, 20]}", "E806", 44, "refuses components.learner.epochs = 0"),
        ("components.learner.gamma: {low: 0.9, high: 1.5}", "E806", 46, "1.5 is greater than the maximum of 1"),
        ("components.learner.epochs: {low: 5.0, high: 20.0}", "E806", 3, "expected an integer"),
        ("components.learner.gamma: {lo: 0.9, high: 0.99}", "E202", 30, "unknown key 'lo' (did you mean 'low'?)"),
    ],
)
def test_a_space_error_points_at_its_line(tmp_path: Path, entry: str, code: str, column: int, message: str) -> None:
    checked = check(tmp_path, f"space:\n  components.learner.ent_coef: {{low: 0.0, high: 0.01}}\n  {entry}\n")
    assert not checked.ok and checked.space is None
    d = next(d for d in checked.diagnostics if d.code == code)
    assert (d.line, d.column) == (3, column) and message in d.message, d
    assert d.hint  # how to fix it


def test_num_envs_the_minibatch_does_not_fit_is_refused_at_its_bound(tmp_path: Path) -> None:
    [d] = check(tmp_path, "space:\n  env.num_envs: {low: 4, high: 16, step: 4}\n").diagnostics
    assert (d.code, d.line) == ("E806", 2) and "minibatch (256) is larger than the rollout batch" in d.message
    assert f"({PPO}:32)" in d.message  # where the spec holds the value it clashes with


def test_eval_objective_needs_a_spec_that_evaluates(tmp_path: Path) -> None:
    spec = tmp_path / "noeval.rl.yaml"
    spec.write_text(PPO.read_text().replace("  eval: {every: 10000, episodes: 10, deterministic: true}\n", ""))
    [d] = check(tmp_path, "objective: eval_mean_return\nspace:\n  train.seed: {choices: [1]}\n", spec).diagnostics
    assert (d.code, d.line) == ("E807", 1)
    default = check(tmp_path, "space:\n  train.seed: {choices: [1]}\n", spec)
    assert default.ok and default.space.objective == "mean_return"


def test_the_command_prints_space_errors_like_validate_and_exits_1(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    space = tmp_path / "bad.tune.yaml"
    space.write_text("space:\n  components.learner.epochs: {choices: [5, 0, 20]}\n")
    r = rlgen("tune", PPO, "--space", space, "--out", tmp_path / "out")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{space}:2:44: error[E806]: the spec refuses components.learner.epochs = 0 (choice 2)" in r.stderr
    assert not (tmp_path / "out").exists()  # no trial ran


def test_without_optuna_the_error_names_the_install(tmp_path: Path) -> None:
    script = "import sys; sys.modules['optuna'] = None; from rlgen.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["tune", str(PPO), "--space", str(ROOT / "examples" / "ppo-cartpole.tune.yaml")]
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2
    assert (
        r.stderr == "rlgen tune: error: tuning needs Optuna: pip install 'rlgen[tune]' (scripts/setup.sh installs it)\n"
    )


@pytest.fixture(scope="module")
def tiny_tune(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """Three real trials of PPO on CartPole, 1,024 env steps each."""
    pytest.importorskip("optuna")
    tmp = tmp_path_factory.mktemp("tune")
    (tmp / "space.tune.yaml").write_text(SPACE)
    r = rlgen(
        "tune", PPO, "--space", tmp / "space.tune.yaml", "--trials", 3, *TINY, "--out", tmp / "out",
        RLGEN_CACHE_DIR=str(tmp / "cache"),
    )  # fmt: skip
    return r, tmp


def test_a_tiny_tune_trains_its_trials_and_writes_the_best_spec(tiny_tune) -> None:
    r, tmp = tiny_tune
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp / "out"
    summary = json.loads((out / "tune.json").read_text())
    trials = summary["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2] and summary["objective"] == "eval_mean_return"
    for t in trials:
        assert t["state"] == "complete", t  # three trials: the pruner waits for five
        rows = [json.loads(line) for line in (out / t["run_dir"] / "metrics.jsonl").read_text().splitlines()]
        assert rows[-1]["env_steps"] == 1024 and t["value"] == rows[-1]["eval_mean_return"]
    best = max(trials, key=lambda t: t["value"])
    assert summary["best"] == {
        "number": best["number"],
        "value": best["value"],
        "params": best["params"],
        "spec": "best.rl.yaml",
    }
    lines = r.stdout.splitlines()
    assert lines[3].split()[:4] == ["trial", "state", "eval_mean_return", "components.learner.lr.start"]
    assert lines[4 + best["number"]].split()[:2] == [str(best["number"] + 1), "*"]

    text = (out / "best.rl.yaml").read_text()
    assert text.startswith(f"# Tuned by `rlgen tune`: trial {best['number'] + 1}, the best of 3")
    result = validate_file(out / "best.rl.yaml")
    assert result.ok, result.diagnostics
    for name, value in best["params"].items():
        doc = result.document
        for key in parse_path(name):
            doc = doc[key]
        assert doc == value, name
    assert result.spec.train.total_steps == 1024  # the command line's --set, written in too


def test_a_seed_samples_the_same_trials(tiny_tune, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real tune's samples again, with trials that train nothing; another seed samples others."""
    from rlgen.app import tune
    from rlgen.cli import main

    def trained(args, space, trial, record, out, every) -> bool:
        record.state, record.value = "complete", float(record.number)
        return False  # not interrupted

    monkeypatch.setattr(tune, "_run", trained)
    real = [t["params"] for t in json.loads((tiny_tune[1] / "out" / "tune.json").read_text())["trials"]]

    def sampled(*extra: str) -> list[dict]:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        args = ["tune", str(PPO), "--space", str(tiny_tune[1] / "space.tune.yaml"), "--trials", "3", "--out", str(out)]
        assert main([*args, *TINY, *extra]) == 0
        return [t["params"] for t in json.loads((out / "tune.json").read_text())["trials"]]

    assert sampled() == real
    assert sampled("--seed", "0") == real  # the spec's own seed
    assert sampled("--seed", "1") != real


def test_a_pruned_trial_is_stopped_as_ctrl_c_stops_a_run(tmp_path: Path) -> None:
    """The mean return is reported on the grid of env steps; the pruner's stop is a SIGINT the run ends cleanly on."""
    from rlgen.app.tune import _watch

    metrics, stopped = tmp_path / "metrics.jsonl", tmp_path / "stopped"
    fake_run = f"""
import json, signal, sys, time
signal.signal(signal.SIGINT, lambda *_: (open({str(stopped)!r}, "w").write("checkpoint"), sys.exit(0)))
with open({str(metrics)!r}, "w") as f:
    for i in range(1, 1000):
        f.write(json.dumps({{"env_steps": 96 * i, "mean_return": float(i)}}) + "\\n")
        f.flush()
        time.sleep(0.01)
"""

    class Trial:
        def __init__(self) -> None:
            self.reports: list[tuple[float, int]] = []

        def report(self, value: float, step: int) -> None:
            self.reports.append((value, step))

        def should_prune(self) -> bool:
            return self.reports[-1][1] >= 1000

    proc, trial = subprocess.Popen([sys.executable, "-c", fake_run], start_new_session=True), Trial()
    assert _watch(proc, metrics, trial, every=250) == 1056  # the first row at or past step 1000
    assert proc.returncode == 0 and stopped.read_text() == "checkpoint"
    assert trial.reports == [(1.0, 0), (3.0, 250), (6.0, 500), (8.0, 750), (11.0, 1000)]


def test_a_trial_stops_cleanly_when_tune_itself_is_killed(tmp_path: Path) -> None:
    """SIGKILL gives rlgen tune no chance to stop its trial: the trial's parent-death signal does
    (SIGINT, as Ctrl-C stops a run: it ends at an iteration with a final checkpoint)."""
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.replace("eval_mean_return", "mean_return"))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "rlgen", "tune", PPO, "--space", space, "--trials", 2, "--out", out]
    for setting in ("train.stop.mean_return=100000", "train.eval.every=0", "train.total_steps=1000192"):
        cmd += ["--set", setting]
    tune = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the first trial: a second starts only once the first has run its million steps (~110 s)
    run, deadline = out / "trial-0", time.monotonic() + 120
    while time.monotonic() < deadline and not (run / "metrics.jsonl").is_file():
        time.sleep(0.2)
    assert (run / "metrics.jsonl").is_file(), "the trial never started training"
    trial = int((run / "ranks" / "0.pid").read_text())
    tune.kill()
    tune.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{trial}").exists():
        time.sleep(0.2)
    assert not Path(f"/proc/{trial}").exists(), "the trial trained on after tune was killed"
    doc = json.loads((run / "run.json").read_text())
    assert doc["status"] == "interrupted" and doc["env_steps"] < 1000192  # as Ctrl-C leaves a run
    assert list((run / "checkpoints").glob(f"ckpt-{doc['env_steps']}.index"))  # its final checkpoint
