"""Learning benchmark: does rlgen reach the RL Baselines3 Zoo's scores within the Zoo's env-step budgets?

    .venv/bin/python benchmarks/learning.py                                   # every case, seeds 0,1,2
    .venv/bin/python benchmarks/learning.py --only a2c-cartpole,ppo-acrobot --seeds 0,1,2
    .venv/bin/python benchmarks/learning.py --only dqn-cartpole --seeds 0 --json dqn.json
    .venv/bin/python benchmarks/learning.py --only ppo-acrobot --keep runs/learning   # keep run directories
    .venv/bin/python benchmarks/learning.py --only a2c-cartpole --no-stop            # whole budget, no stop
    .venv/bin/python benchmarks/learning.py --only ppo-cartpole,ppo-acrobot --policy async-actors --workers 3
    .venv/bin/python benchmarks/learning.py --only sac-pendulum --set loop.collect.repeat=64 --set loop.learn.repeat=64

Each case is a spec (the Zoo's hyper-parameters and budget, a stop target). For each
case and seed the script writes a copy of the spec with ``train.seed`` set (budget,
stop target and periodic evaluation unchanged) and trains it in a fresh process with
``python -m rlgen run COPY --quiet --run-dir DIR --build-dir DIR2``, one run at a
time. It then reads the run directory (``metrics.jsonl``, ``run.json``,
``state.json``) and, with ``--final-eval N`` (default 10), evaluates the exported
policy with ``rlgen eval`` (deterministic, as the Zoo's benchmark), and the policy of
the best periodic evaluation (``rlgen eval --best``). ``--no-stop`` drops
``train.stop`` from the copies, so every run trains for the whole budget and the final
figures describe the agent at the budget (as the Zoo's) rather than at the target.

Per seed: whether the mean training return over the last 100 episodes reached the
target (env steps and training time when it first did), that mean at the end (runs
stop at the target, so a run that reached it ends at or just above it), the last
periodic evaluation and the final evaluation, env steps and wall time. Per case:
mean ± std over seeds, seeds at target, median steps to target, and the Zoo's budget
and published score (benchmark.md of DLR-RM/rl-baselines3-zoo: one trained agent,
deterministic evaluation over about 150k steps; *not* a mean over seeds).

``--policy`` and ``--workers`` train every run under that distribution policy (default: the
spec's own), and ``--set PATH=VALUE`` (repeatable) overrides a setting of every run's spec;
under overlapped and asynchronous policies the table adds the policy lag
(mean and most, in learner updates, from ``policy_lag``) and the experience dropped as
too stale (``dropped``).

A run that exits non-zero (e.g. a spec `rlgen build` cannot generate yet) shows as
failed with the last line of its stderr; the other runs go on. "Time" is the run's own
training clock (from the start of its first iteration, after imports and set-up; the
first iteration's tracing is included); "process" is the whole subprocess (start-up and
build included).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlgen.app.bench import read_run as bench_read_run

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    spec: Path
    target: float
    budget: int  # the Zoo's n_timesteps
    zoo_score: str  # benchmark.md mean_reward ± std_reward
    note: str = ""


# Zoo scores: benchmark.md of DLR-RM/rl-baselines3-zoo (the same figures at commits 02a1a90 and 0088472).
CASES: dict[str, Case] = {
    "ppo-cartpole": Case(ROOT / "examples" / "ppo-cartpole.rl.yaml", 475.0, 100_000, "500.0 ± 0.0"),
    "a2c-cartpole": Case(ROOT / "examples" / "a2c-cartpole.rl.yaml", 475.0, 500_000, "500.0 ± 0.0"),
    "ppo-acrobot": Case(
        ROOT / "benchmarks" / "specs" / "ppo-acrobot.rl.yaml",
        -100.0,
        1_000_000,
        "-73.5 ± 18.2",
        "Zoo trains with VecNormalize (normalize: true); this spec does not (env.normalize)",
    ),
    "ppo-mountaincar": Case(
        ROOT / "benchmarks" / "specs" / "ppo-mountaincar.rl.yaml",
        -110.0,
        1_000_000,
        "-110.4 ± 19.5",
        "with env.normalize (the Zoo's normalize: true)",
    ),
    "dqn-cartpole": Case(ROOT / "examples" / "dqn-cartpole.rl.yaml", 475.0, 50_000, "500.0 ± 0.0"),
    "dqn-acrobot": Case(ROOT / "benchmarks" / "specs" / "dqn-acrobot.rl.yaml", -100.0, 100_000, "-76.6 ± 11.8"),
    # issue 11's target for SAC: a deterministic evaluation of at least -200 at the Zoo's 20k steps
    "sac-pendulum": Case(ROOT / "examples" / "sac-pendulum.rl.yaml", -200.0, 20_000, "-176 (as issue 11 quotes it)"),
    "td3-pendulum": Case(ROOT / "examples" / "td3-pendulum.rl.yaml", -200.0, 20_000, "not quoted here"),
    # gSDE with PPO, as the Zoo's setting (target: the example's stop; -150 or so is solved)
    "ppo-pendulum": Case(ROOT / "examples" / "ppo-pendulum.rl.yaml", -250.0, 102_400, "not quoted here", "with gSDE"),
    # gSDE: the Zoo's SAC setting for this sparse-reward task (target: its reward_threshold)
    "sac-mountaincar-continuous": Case(
        ROOT / "examples" / "sac-mountaincar-continuous.rl.yaml", 90.0, 50_000, "94.7 ± 1.1", "with gSDE"
    ),
}


@dataclass
class SeedResult:
    case: str
    seed: int
    ok: bool
    error: str = ""
    stop_reason: str = ""
    env_steps: int = 0
    episodes: int = 0
    train_time: float | None = None  # the run's training clock (s)
    process_time: float = 0.0  # the whole subprocess (s)
    steps_per_s: float | None = None
    reached: bool = False
    steps_to_target: int | None = None
    time_to_target: float | None = None
    final_return: float | None = None  # mean training return, last 100 episodes, at the end
    last_eval: float | None = None  # last periodic evaluation during training (mean return)
    last_eval_steps: int | None = None
    final_eval: float | None = None  # `rlgen eval` of the exported policy
    final_eval_std: float | None = None
    best_eval: float | None = None  # `rlgen eval --best`: the policy of the best periodic evaluation
    best_eval_std: float | None = None
    run_dir: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def seeded_copy(spec: Path, seed: int, out: Path, stop: bool = True) -> Path:
    """Write ``spec`` with ``train.seed`` set to ``seed`` (everything else as written);
    ``stop=False`` also drops ``train.stop``, so the run trains for its whole budget."""
    lines = spec.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if re.match(r"train:\s*(#.*)?$", ln)), None)
    if start is None:
        raise ValueError(f"{spec}: no block-style `train:` section")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"\S", lines[i])), len(lines))
    body = lines[start + 1 : end]
    keys = [ln for ln in body if ln.strip() and not ln.lstrip().startswith("#")]
    indent = re.match(r"\s*", keys[0]).group(0) if keys else "  "
    seed_line = f"{indent}seed: {seed}\n"
    hits = [i for i, ln in enumerate(body) if re.match(rf"{indent}seed:", ln)]
    if hits:
        body[hits[0]] = seed_line
    else:
        body.insert(0, seed_line)
    if not stop:
        at = next((i for i, ln in enumerate(body) if re.match(rf"{indent}stop:", ln)), None)
        if at is not None:  # the key and its deeper-indented continuation lines
            stop_end = next(
                (j for j in range(at + 1, len(body)) if not re.match(rf"{indent}\s", body[j]) and body[j].strip()),
                len(body),
            )
            del body[at:stop_end]
    text = "".join(lines[: start + 1] + body + lines[end:])
    train = yaml.safe_load(text)["train"]
    if train.get("seed") != seed or (not stop and "stop" in train):
        raise ValueError(f"{spec}: could not set train.seed / drop train.stop in the copy")
    out.write_text(text, encoding="utf-8")
    return out


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _failure(stderr: str) -> str:
    """The last stderr line; after `rlgen validate`'s "N error(s), M warning(s)" summary, the first error too."""
    last = _last_line(stderr)
    if re.fullmatch(r"\d+ errors?, \d+ warnings?", last):
        first = next((ln.strip() for ln in stderr.splitlines() if "error[" in ln), "")
        return f"{first} ({last})" if first else last
    return last


def read_run(result: SeedResult, run_dir: Path, target: float) -> None:
    """Fill ``result`` from a finished run directory."""
    metrics = run_dir / "metrics.jsonl"
    rows = [json.loads(ln) for ln in metrics.read_text().splitlines() if ln.strip()] if metrics.exists() else []
    if not rows:
        result.ok, result.error = False, "no metrics written"
        return
    last = rows[-1]
    summary = bench_read_run(run_dir, "single", 1, target)  # steps/s leave out the first iteration (tracing)
    result.env_steps, result.train_time, result.final_return = summary.env_steps, summary.wall, summary.final_return
    result.episodes = int(last.get("episodes") or 0)
    result.steps_per_s = summary.steps_per_s or None
    if summary.steps_to_target is not None:
        result.reached = True
        result.steps_to_target, result.time_to_target = summary.steps_to_target, summary.time_to_target
    evals = [r for r in rows if r.get("eval_mean_return") is not None]
    if evals:
        result.last_eval, result.last_eval_steps = evals[-1]["eval_mean_return"], int(evals[-1]["env_steps"])
    run = _read_json(run_dir / "run.json")
    result.stop_reason = str(run.get("stop_reason", ""))
    state = _read_json(run_dir / "state.json")  # written with the final checkpoint
    if state:
        result.env_steps = int(state.get("env_steps", result.env_steps))
        result.episodes = int(state.get("episodes", result.episodes))
        returns = state.get("returns") or []
        if returns:
            result.final_return = sum(returns) / len(returns)
        if state.get("elapsed") is not None:
            result.train_time = float(state["elapsed"])
    for key in ("policy_loss", "value_loss", "entropy", "explained_variance", "loss", "lr"):
        if last.get(key) is not None:
            result.extra[key] = last[key]
    lags = [r["policy_lag"] for r in rows if r.get("policy_lag") is not None]
    if lags:
        result.extra["lag_mean"], result.extra["lag_max"] = sum(lags) / len(lags), max(lags)
    if last.get("dropped") is not None:
        result.extra["dropped"] = last["dropped"]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def final_eval(result: SeedResult, run_dir: Path, episodes: int, timeout: float, best: bool = False) -> None:
    """``rlgen eval`` of the exported policy (``best``: of ``policy-best/``, if the run has one)."""
    if best and not (run_dir / "policy-best").is_dir():
        return
    args = [sys.executable, "-m", "rlgen", "eval", str(run_dir), "--episodes", str(episodes), "--json"]
    key = "best_eval" if best else "final_eval"
    try:
        proc = subprocess.run(
            args + (["--best"] if best else []), capture_output=True, text=True, env=_env(), timeout=timeout
        )
    except subprocess.TimeoutExpired:
        result.extra[f"{key}_error"] = f"timed out after {timeout:.0f} s"
        return
    if proc.returncode != 0:
        result.extra[f"{key}_error"] = _last_line(proc.stderr) or f"exit {proc.returncode}"
        return
    doc = json.loads(_last_line(proc.stdout))
    setattr(result, key, doc["mean_return"])
    setattr(result, f"{key}_std", doc["std_return"])


def _env() -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def run_seed(
    name: str,
    case: Case,
    seed: int,
    work: Path,
    eval_episodes: int,
    timeout: float,
    stop: bool = True,
    deploy: tuple[str, ...] = (),
) -> SeedResult:
    result = SeedResult(name, seed, ok=True)
    base = work / f"{name}-seed{seed}"
    base.mkdir(parents=True, exist_ok=True)
    spec = seeded_copy(case.spec, seed, base / case.spec.name, stop)
    run_dir, build_dir = base / "run", base / "build"
    result.run_dir = str(run_dir)
    args = [sys.executable, "-m", "rlgen", "run", str(spec), "--quiet", "--run-dir", str(run_dir)]
    args += ["--build-dir", str(build_dir), *deploy]
    start = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=timeout, cwd=base)
    except subprocess.TimeoutExpired:
        result.ok, result.error = False, f"timed out after {timeout:.0f} s"
        result.process_time = time.perf_counter() - start
        return result
    result.process_time = time.perf_counter() - start
    if proc.returncode != 0:
        result.ok = False
        result.error = f"exit {proc.returncode}: " + (_failure(proc.stderr) or _last_line(proc.stdout) or "no output")
        if run_dir.exists():  # keep what a failed run logged (the failure stays the headline)
            read_run(result, run_dir, case.target)
            result.ok = False
        return result
    read_run(result, run_dir, case.target)
    if result.ok and eval_episodes > 0:
        final_eval(result, run_dir, eval_episodes, timeout)
        final_eval(result, run_dir, eval_episodes, timeout, best=True)
    return result


# --- reporting -------------------------------------------------------------------


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _mean_std(xs: list[float]) -> str:
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.1f} ± {sd:.1f}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = []
    for row in [head, *rows]:
        cells = zip(row, widths, strict=True)
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells)))
    return "\n".join(out)


def seed_line(r: SeedResult, target: float) -> str:
    if not r.ok and not r.env_steps:
        return f"  seed {r.seed}: FAILED ({r.error})"
    status = "FAILED " if not r.ok else ""
    hit = (
        f"reached {target:g} at {r.steps_to_target:,} steps, {r.time_to_target:.1f} s"
        if r.reached
        else f"did not reach {target:g}"
    )
    evals = f"last eval {_f(r.last_eval)}" + (f" @ {r.last_eval_steps:,}" if r.last_eval_steps is not None else "")
    if r.final_eval is not None:
        evals += f", final eval {r.final_eval:.1f} ± {r.final_eval_std:.1f}"
    elif "final_eval_error" in r.extra:
        evals += f", final eval failed ({r.extra['final_eval_error']})"
    if r.best_eval is not None:
        evals += f", best-policy eval {r.best_eval:.1f} ± {r.best_eval_std:.1f}"
    return (
        f"  seed {r.seed}: {status}{hit}; train return (last 100) {_f(r.final_return)}; {evals}; "
        f"{r.env_steps:,} env steps, {_f(r.train_time)} s training ({_f(r.steps_per_s, '{:,.0f}')} steps/s), "
        f"{r.process_time:.1f} s process; stop: {r.stop_reason or '-'}" + _lag(r) + (f"; {r.error}" if r.error else "")
    )


def _lag(r: SeedResult) -> str:
    if "lag_mean" not in r.extra:
        return ""
    text = f"; policy lag mean {r.extra['lag_mean']:.2f}, most {r.extra['lag_max']}"
    return text + (f", dropped {r.extra['dropped']:,}" if "dropped" in r.extra else "")


def case_table(name: str, case: Case, results: list[SeedResult], deploy: str = "") -> str:
    ok = [r for r in results if r.ok]
    hits = [r for r in ok if r.reached]
    evals = [r.final_eval if r.final_eval is not None else r.last_eval for r in ok]
    evals = [e for e in evals if e is not None]
    eval_kind = "final eval" if any(r.final_eval is not None for r in ok) else "last eval"
    rows = [
        ["runs ok", f"{len(ok)}/{len(results)}"],
        [f"seeds at target ({case.target:g})", f"{len(hits)}/{len(results)}"],
        ["median steps to target", _f(_median([r.steps_to_target for r in hits]), "{:,.0f}")],
        ["median time to target (s)", _f(_median([r.time_to_target for r in hits]))],
        ["train return, last 100 (mean ± std)", _mean_std([r.final_return for r in ok if r.final_return is not None])],
        [f"{eval_kind} return (mean ± std)", _mean_std(evals)],
        ["best-policy eval (mean ± std)", _mean_std([r.best_eval for r in ok if r.best_eval is not None])],
        ["env steps (median)", _f(_median([r.env_steps for r in ok]), "{:,.0f}")],
        ["training time, s (median)", _f(_median([r.train_time for r in ok if r.train_time is not None]))],
        ["budget (Zoo n_timesteps)", f"{case.budget:,}"],
        ["Zoo score (benchmark.md)", case.zoo_score],
    ]
    lagged = [r for r in ok if "lag_mean" in r.extra]
    if lagged:
        lag = _median([r.extra["lag_mean"] for r in lagged])
        most = max(r.extra["lag_max"] for r in lagged)
        rows.append(["policy lag in updates: mean (median) / most", f"{lag:.2f} / {most}"])
    title = f"{name}: {case.spec.relative_to(ROOT)}, seeds {[r.seed for r in results]}{deploy}"
    lines = [title, _table(["", "rlgen"], rows)]
    if case.note:
        lines.append(f"note: {case.note}")
    lines += [f"failed seed {r.seed}: {r.error}" for r in results if not r.ok]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases (default: {','.join(CASES)})")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--json", metavar="FILE", help="also write every result to FILE")
    parser.add_argument("--final-eval", type=int, default=10, metavar="N", help="episodes of `rlgen eval` (0 = off)")
    parser.add_argument("--keep", metavar="DIR", help="keep specs, builds and run directories in DIR")
    parser.add_argument("--no-stop", action="store_true", help="drop train.stop: train every run for its whole budget")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per run (default 7200)")
    parser.add_argument("--policy", help="train every run under this distribution policy (default: the spec's)")
    parser.add_argument("--workers", type=int, help="workers for --policy")
    parser.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", help="override a setting of every case's spec"
    )
    args = parser.parse_args()
    deploy = (
        tuple(["--policy", args.policy] if args.policy else [])
        + tuple(["--workers", str(args.workers)] if args.workers else [])
        + tuple(x for item in args.set for x in ("--set", item))
    )
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlgen-learning-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[SeedResult]] = {}
    try:
        for name in names:
            case = CASES[name]
            results[name] = []
            for seed in seeds:
                print(f"{name} seed {seed}: running ...", file=sys.stderr, flush=True)
                r = run_seed(name, case, seed, work.resolve(), args.final_eval, args.timeout, not args.no_stop, deploy)
                print(seed_line(r, case.target), file=sys.stderr, flush=True)
                results[name].append(r)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for name, runs in results.items():
        case = CASES[name]
        print(case_table(name, case, runs, f", {' '.join(deploy)}" if deploy else ""))
        for r in runs:
            print(seed_line(r, case.target))
        print()
    if args.json:
        doc = {
            name: {
                "spec": str(CASES[name].spec.relative_to(ROOT)),
                "target": CASES[name].target,
                "budget": CASES[name].budget,
                "zoo_score": CASES[name].zoo_score,
                "seeds": [asdict(r) for r in runs],
            }
            for name, runs in results.items()
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
