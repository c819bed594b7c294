"""``rlgen tune SPEC --space FILE --trials N``: search a spec's hyper-parameters with Optuna.

Each trial is one ``rlgen run`` of the spec with the trial's values as ``--set``s, in a
process of its own (run directory ``OUT/trial-K``, its output in ``OUT/trial-K.log``,
its build in its run directory). Its ``metrics.jsonl`` is read as it is written: the
mean training return goes to Optuna's median pruner on a grid of env steps every trial
shares, and a trial the pruner stops gets SIGINT, as Ctrl-C stops a run (it finishes the
iteration and writes a final checkpoint; its run directory stays). TPE, seeded with the
spec's ``train.seed`` (``--seed``), samples the trials, so a command samples the same
values each time it is run.

At the end: a table of the trials, ``OUT/best.rl.yaml`` (the spec with the best trial's
values written in, as ``--set`` writes them) and ``OUT/tune.json`` (Optuna-free).

Optuna is the optional ``tune`` extra: no other command needs it.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import child
from .errors import InvalidSpec, UsageError
from .spec import Deployment, validated

#: Intermediate values per trial that the pruner compares: every ``total_steps / REPORTS`` env steps.
REPORTS = 20
#: Seconds between looks at a running trial's metrics.
POLL_S = 0.5
#: Seconds a stopped trial gets to finish its iteration and write its checkpoint.
STOP_WAIT_S = 60.0
BEST_SPEC = "best.rl.yaml"
PR_SET_PDEATHSIG = 1  # prctl(2)


@dataclass
class TrialRecord:
    """One trial as ``tune.json`` keeps it."""

    number: int
    params: dict[str, Any]
    state: str = "running"  # then complete, pruned, failed or interrupted
    value: float | None = None
    note: str = ""  # why it was pruned or failed
    seconds: float = 0.0
    run_dir: str = ""


@dataclass(frozen=True)
class TuneRequest:
    spec: Path
    space: Path
    trials: int = 20
    out: Path | None = None  # default <train.run_dir>/<name>-tune-<time>
    deployment: Deployment = Deployment()


@dataclass
class TuneOutcome:
    out: Path
    objective: str
    records: list[TrialRecord] = field(default_factory=list)
    best: TrialRecord | None = None

    @property
    def best_spec(self) -> Path:
        return self.out / BEST_SPEC


def tune(request: TuneRequest, report: Callable[[str], None] = print) -> TuneOutcome:
    """Run the trials (``report`` gets a line as each ends); write ``best.rl.yaml`` and
    ``tune.json``. :class:`Failed` (after both are written) when no trial completed."""
    try:
        import optuna
    except ImportError:
        raise UsageError("tuning needs Optuna: pip install 'rlgen[tune]' (scripts/setup.sh installs it)") from None
    from optuna.trial import TrialState

    from rlgen.runtime.rundir import default_run_dir

    if request.trials < 1:
        raise UsageError(f"--trials {request.trials}: give at least 1")
    result = validated(request.spec, request.deployment)
    space = _space(request, result)
    spec = result.spec
    out = request.out or default_run_dir(f"{spec.name}-tune", spec.train.run_dir)
    try:
        if out.exists() and any(out.iterdir()):
            raise UsageError(f"{out} exists and is not empty; choose another --out")
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warmup = spec.train.total_steps // 4 if space.warmup_steps is None else space.warmup_steps
    pruner = optuna.pruners.MedianPruner(space.startup_trials, warmup) if space.prune else None
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.TPESampler(seed=spec.train.seed), pruner=pruner
    )
    every = max(spec.train.total_steps // REPORTS, 1)
    outcome = TuneOutcome(out, space.objective)
    for number in range(request.trials):
        trial = study.ask()
        record = TrialRecord(number, {p.name: _suggest(trial, p) for p in space.params}, run_dir=f"trial-{number}")
        outcome.records.append(record)
        interrupted = _run(request, space, trial, record, out, every)
        state = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED}.get(record.state, TrialState.FAIL)
        study.tell(trial, record.value if record.state == "complete" else None, state)
        report(_line(record, space.objective, request.trials))
        if interrupted:
            break
    _finish(request, result, space, outcome)
    return outcome


def _space(request: TuneRequest, result):  # noqa: ANN001, ANN202
    """The checked search space; :class:`InvalidSpec` with its diagnostics."""
    from rlgen.api import validate_file
    from rlgen.dsl.tunespace import check_space

    def with_setting(setting):  # noqa: ANN001, ANN202
        return validate_file(request.spec, **request.deployment.with_settings(setting).overrides())

    try:
        checked = check_space(request.space, result.spec, with_setting)
    except OSError as exc:
        raise UsageError(f"cannot read {request.space}: {exc.strerror or exc}") from None
    if not checked.ok:
        raise InvalidSpec(checked.diagnostics, {checked.file: checked.text})
    return checked.space


def _suggest(trial, p) -> Any:
    """The trial's value of ``p`` (choices by index, so that any YAML value can be one)."""
    if p.choices:
        return p.choices[trial.suggest_categorical(p.name, list(range(len(p.choices))))]
    if p.integer:
        return trial.suggest_int(p.name, p.low, p.high, step=p.step or 1, log=p.log)
    return trial.suggest_float(p.name, p.low, p.high, step=p.step, log=p.log)


def _run(request: TuneRequest, space, trial, record: TrialRecord, out: Path, every: int) -> bool:  # noqa: ANN001
    """Train one trial in a process of its own and fill in how it ended; True if Ctrl-C stopped it."""
    run_dir, log = out / record.run_dir, out / f"{record.run_dir}.log"
    args = ["run", str(request.spec), *request.deployment.argv()]
    args += [w for p in space.params for w in p.setting(record.params[p.name]).flag.split(" ", 1)]
    args += ["--run-dir", str(run_dir), "--quiet"]
    started = time.monotonic()
    with open(log, "wb") as f:  # its own session: Ctrl-C in the terminal reaches only this process
        proc = child.start(args, output=f, before=_interrupted_with_parent())
    interrupted, pruned_at = False, None
    try:
        pruned_at = _watch(proc, run_dir / "metrics.jsonl", trial, every)
    except KeyboardInterrupt:
        _stop(proc)
        interrupted = True
    record.seconds = round(time.monotonic() - started, 1)
    doc = _run_json(run_dir)
    if pruned_at is not None:
        record.state = "pruned"
        record.note = f"stopped at {pruned_at:,} env steps: its mean return was below the median of earlier trials"
    elif proc.returncode == 0 and doc.get("status") == "finished":  # Ctrl-C may come as it ends
        record.value = _objective(run_dir, doc, space.objective)
        record.state = "complete" if record.value is not None else "failed"
        record.note = "" if record.value is not None else f"the run logged no {space.objective}"
    elif interrupted:
        record.state, record.note = "interrupted", "stopped by Ctrl-C"
    else:
        record.state, record.note = "failed", _error_line(log) or f"rlgen run exited with status {proc.returncode}"
    return interrupted


def _watch(proc: subprocess.Popen, metrics: Path, trial, every: int) -> int | None:
    """Report the trial's mean return at each grid step it reaches until it ends; the env
    steps at which the pruner stopped it, or None."""
    rows, reported = _Rows(metrics), -1
    while True:
        ended = proc.poll() is not None
        for row in rows.new():
            step = row.get("env_steps", 0) // every * every
            if row.get("mean_return") is None or step <= reported:
                continue
            reported = step
            trial.report(row["mean_return"], step)
            if not ended and trial.should_prune():
                _stop(proc)
                return row["env_steps"]
        if ended:
            return None
        time.sleep(POLL_S)


class _Rows:
    """The rows a run appends to its ``metrics.jsonl``, as they come (a half-written line waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def new(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:  # not written yet
            return []
        whole = data[: data.rfind(b"\n") + 1]
        self.offset += len(whole)
        return [json.loads(line) for line in whole.splitlines() if line.strip()]


def _interrupted_with_parent():
    """For a trial's process, before it starts: SIGINT when ``rlgen tune`` dies, however it dies
    (SIGKILL included), so that the trial stops as Ctrl-C stops a run instead of training on
    unseen (Linux's parent-death signal; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGINT))
        if os.getppid() != parent:  # tune died before the signal was armed
            os.kill(os.getpid(), signal.SIGINT)

    return arm


def _stop(proc: subprocess.Popen) -> None:
    """Stop a trial as Ctrl-C stops a run (it finishes its iteration and writes a checkpoint);
    kill it if it has not ended in :data:`STOP_WAIT_S` or on a second Ctrl-C."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_WAIT_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()


def _run_json(run_dir: Path) -> dict[str, Any]:
    """The trial's ``run.json`` ({} if it never wrote one)."""
    from rlgen.runtime.rundir import RunDir

    try:
        return RunDir(run_dir).read()
    except (OSError, ValueError):
        return {}


def _objective(run_dir: Path, doc: dict[str, Any], objective: str) -> float | None:
    """The trial's last evaluation (the final one, if the run ended with one), or its mean training return."""
    from rlgen.runtime.metricslog import read_metrics

    if objective == "mean_return":
        return doc.get("mean_return")
    evals = [(doc.get("final_eval") or {}).get("mean_return")]
    evals += [row.get("eval_mean_return") for row in reversed(read_metrics(run_dir))]
    return next((v for v in evals if v is not None), None)


def _error_line(log: Path) -> str:
    """What a failed trial said: its first line naming an error, else its last line."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")


def _line(record: TrialRecord, objective: str, trials: int) -> str:
    """A trial's line as it ends."""
    values = ", ".join(f"{k}={_shown(v)}" for k, v in record.params.items())
    how = f"{objective} {_shown(record.value)}" if record.value is not None else record.note
    return f"trial {record.number + 1}/{trials} {record.state} in {record.seconds:.0f} s: {how} ({values})"


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def _finish(request: TuneRequest, result, space, outcome: TuneOutcome) -> None:  # noqa: ANN001
    """The best spec and ``tune.json``; :class:`Failed` if no trial completed."""
    done = [r for r in outcome.records if r.state == "complete"]
    outcome.best = max(done, key=lambda r: r.value) if done else None
    summary = {
        "spec": str(request.spec),
        "space": str(request.space),
        "objective": space.objective,
        "seed": result.spec.train.seed,
        "overrides": list(result.overrides),
        "trials": [asdict(r) for r in outcome.records],
        "best": None,
    }
    best = outcome.best
    if best is not None:
        outcome.best_spec.write_text(_best_spec(request, result, space, best, len(outcome.records)))
        summary["best"] = {"number": best.number, "value": best.value, "params": best.params, "spec": BEST_SPEC}
    (outcome.out / "tune.json").write_text(json.dumps(summary, indent=2) + "\n")


def table(outcome: TuneOutcome) -> str:
    """The trials, one a line, the best marked."""
    return _table(outcome.records, outcome.objective, outcome.best)


def _table(records: list[TrialRecord], objective: str, best: TrialRecord | None) -> str:
    names = list(records[0].params) if records else []
    head = ["trial", "state", objective, *names]
    rows = [
        [
            f"{r.number + 1}{' *' if r is best else ''}",
            r.state,
            _shown(r.value) if r.value is not None else "-",
            *(_shown(r.params[n]) for n in names),
        ]
        for r in records
    ]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *rows])


def _best_spec(request: TuneRequest, base, space, best: TrialRecord, trials: int) -> str:  # noqa: ANN001
    """The spec with the best trial's values (and the command line's overrides) written in, as YAML."""
    import yaml

    from rlgen.api import validate_file

    sets = [p.setting(best.params[p.name]) for p in space.params]
    result = validate_file(request.spec, **request.deployment.with_settings(*sets).overrides())
    header = [
        f"Tuned by `rlgen tune`: trial {best.number + 1}, the best of {trials} ({space.objective} {best.value:.4g}),",
        f"of {request.spec} over the space {request.space}. Its values:",
        *(f"  {s.flag}" for s in sets),
    ]
    if base.overrides:
        header.append(f"Also written in, as given to rlgen tune: {' '.join(base.overrides)}")
    body = yaml.safe_dump(result.document, sort_keys=False, allow_unicode=True, width=1000)
    return "".join(f"# {line}\n" for line in header) + "\n" + body
