"""SAC training speed on HalfCheetah-v5: rlgen against Stable-Baselines3, side by side in one run.

    nice -n 5 .venv/bin/python benchmarks/sac_speed.py                       # settings 1 and 64, one run each
    nice -n 5 .venv/bin/python benchmarks/sac_speed.py --settings 64 --steps 10000 --repeats 3 --json sac.json
    nice -n 5 .venv/bin/python benchmarks/sac_speed.py --sb3-python /other/venv/bin/python --sb3-threads 1
    nice -n 5 .venv/bin/python benchmarks/sac_speed.py --settings 1 --sb3-threads 1 --rlgen-threads 1  # 1 thread each

A *setting* N is (train_freq, gradient_steps) = (N, N): 1 is the RL Zoo's default for
SAC (one env step, one gradient step), 64 collects 64 steps and then takes 64
gradient steps. Everything else is SB3's SAC default (as the Zoo's HalfCheetah
settings, less its learning_starts of 10000): 1 env, [256, 256] ReLU actor and twin
critics, replay 1e6, batch 256, lr 3e-4, tau 0.005, gamma 0.99, ent_coef auto, seed 0.
Both learn from ``--learning-starts`` env steps on (default 1000) for ``--steps`` env
steps in all (rounded up to a multiple of N).

* rlgen: a HalfCheetah variant of examples/sac-pendulum.rl.yaml, written to a
  temporary file (``loop.collect.repeat`` = train_freq, ``loop.learn.repeat`` =
  gradient_steps, ``after`` = learning starts; no periodic evaluation, no TensorBoard),
  trained by ``python -m rlgen run SPEC --quiet`` in a fresh process under ``single``
  with rlgen's own threads (one inter-op thread; intra-op threads: every core, since
  this update is heavy, see ``rlgen.codegen.lower.threads``; the run's ``run.json``
  says how many, and the table prints it) unless ``--rlgen-threads`` sets them.
  Speed comes from the run's metrics.jsonl: (env steps at the end - env steps of the
  first row that learned) / (time at the end - time of that row), so start-up, the
  steps before learning starts and the first learning iteration (where the update
  traces and XLA-compiles) are left out.
* SB3: ``SAC("MlpPolicy", ...)`` with the same settings, device cpu, run by
  ``--sb3-python`` (a virtualenv with torch and stable-baselines3 2.9.2, the ``bench``
  extra) in a fresh process. Torch threads: left at torch's default (what an SB3 user
  gets; the figure is printed) unless ``--sb3-threads`` says otherwise (on a busy
  machine torch's default of one thread per core can be ten times slower per gradient
  step than one thread: OpenMP workers wait on each other; compare with
  ``--sb3-threads 1 --rlgen-threads 1`` for one thread each). A callback
  measures the same span: from the end of the first ``train()`` call to the end of
  training; ``train()`` is timed on its own, so the rest is collection (acting,
  env stepping, storing).

Runs alternate (rlgen, SB3, rlgen, SB3, ...) one at a time, so that load from other
work on the machine falls on both alike; with ``--repeats`` > 1 the table gives
medians. Then, per setting, where rlgen's time goes in one iteration (train_freq env
steps + gradient_steps gradient steps): the parts the run times (``time_*`` of the
metrics rows), the iteration's whole time (from ``time``) and what no part accounts
for, next to SB3's collection and training time for the same span.

The machine is shared: compare figures within one run of this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from string import Template
from typing import Any

from rlgen.runtime.metricslog import per_iteration

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("inference", "env", "buffer", "update", "comm", "loop", "other")  # the time_* of a metrics row

SPEC = Template("""\
# SAC on HalfCheetah-v5 for benchmarks/sac_speed.py (model: examples/sac-pendulum.rl.yaml).
rlgen: 1
name: sac-halfcheetah-speed
description: SAC on HalfCheetah-v5, train_freq $train_freq, gradient_steps $gradient_steps.

env:
  id: HalfCheetah-v5
  num_envs: 1

networks:
  pi: {kind: mlp, hidden: [256, 256], activation: relu, init: glorot_uniform}
  q: {kind: mlp, hidden: [256, 256], activation: relu, init: glorot_uniform}

components:
  actor: {kind: policy, network: pi, distribution: squashed_gaussian}
  replay: {kind: replay, capacity: 1000000, batch_size: 256}
  learner: {kind: sac, actor: actor, critic: q, lr: 3.0e-4, tau: 0.005, gamma: 0.99, ent_coef: auto}

loop:
  init: [env.reset() -> obs]
  collect:
    repeat: $train_freq
    do:
      - actor.act(obs) -> action
      - env.step(action) -> next_obs, reward, terminated, truncated
      - replay.insert(obs, action, reward, next_obs, terminated, truncated)
    carry: {obs: next_obs}
  learn:
    after: $learning_starts
    repeat: $gradient_steps
    do:
      - replay.sample() -> batch
      - learner.update(batch) -> metrics

partitions:
  env: {at: env.step, send: [action], receive: [next_obs, reward, terminated, truncated]}
  experience: {after: collect, send: [replay], receive: [weights]}
  gradients: {at: learner.update, reduce: [gradients]}

deploy:
  policy: single

train:
  total_steps: $total_steps
  seed: $seed
  eval: {every: 0}
  log: {every: 10, tensorboard: false}
""")

SB3_SCRIPT = r"""
import json, os, sys, time
cfg = json.loads(sys.argv[1])
import torch
if cfg["threads"]:
    torch.set_num_threads(cfg["threads"])
import gymnasium as gym
import stable_baselines3
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback


class Clock(BaseCallback):
    # train() runs between one rollout's end and the next rollout's start: the first
    # rollout start after an update is the end of the first train() call.
    def __init__(self):
        super().__init__()
        self.train_s, self.first_train_s, self.mark, self.end = 0.0, None, None, None

    def _on_rollout_start(self):
        if self.mark is None and self.model._n_updates > 0:
            self.mark = (time.perf_counter(), self.num_timesteps, self.train_s, self.model._n_updates)

    def _on_step(self):
        return True

    def _on_training_end(self):
        self.end = (time.perf_counter(), self.num_timesteps, self.train_s, self.model._n_updates)


t_start = time.perf_counter()
env = gym.make("HalfCheetah-v5")
model = SAC("MlpPolicy", env, learning_rate=3e-4, buffer_size=1_000_000, learning_starts=cfg["learning_starts"],
            batch_size=256, tau=0.005, gamma=0.99, train_freq=cfg["train_freq"], gradient_steps=cfg["gradient_steps"],
            ent_coef="auto", policy_kwargs={"net_arch": [256, 256]}, seed=cfg["seed"], device="cpu", verbose=0)
clock = Clock()
train = model.train


def timed_train(*args, **kwargs):
    t0 = time.perf_counter()
    train(*args, **kwargs)
    dt = time.perf_counter() - t0
    clock.train_s += dt
    if clock.first_train_s is None:
        clock.first_train_s = dt


model.train = timed_train
t_learn = time.perf_counter()
model.learn(total_timesteps=cfg["total_steps"], callback=clock)
(t0, s0, tr0, u0), (t1, s1, tr1, u1) = clock.mark, clock.end
print(json.dumps({
    "env_steps": int(s1), "gradient_steps": int(u1), "measured_steps": int(s1 - s0), "measured_s": t1 - t0,
    "steps_per_s": (s1 - s0) / (t1 - t0), "train_s": tr1 - tr0, "collect_s": (t1 - t0) - (tr1 - tr0),
    "measured_gradient_steps": int(u1 - u0), "first_train_s": clock.first_train_s, "learn_wall": t1 - t_learn,
    "process_setup_s": t_learn - t_start, "torch_threads": torch.get_num_threads(),
    "torch_interop_threads": torch.get_num_interop_threads(), "torch": torch.__version__,
    "sb3": stable_baselines3.__version__,
}))
"""


def load() -> str:
    """The load averages (other work on this shared machine shows up here)."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if "error" in ln.lower()), lines[-1] if lines else "failed")


def read_metrics(run_dir: Path, train_freq: int, gradient_steps: int) -> dict[str, Any]:
    """Speed over the rows after the first one that learned (that iteration has a row of its
    own: it traces and compiles the update), and their mean time per part per iteration."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    learned = [i for i, r in enumerate(rows) if r.get("time_update", 0.0) > 0.0]
    if not learned or learned[0] == len(rows) - 1:
        raise RuntimeError("fewer than two iterations learned: raise --steps")
    first = learned[0]
    mark, end = rows[first], rows[-1]
    steady = rows[first + 1 :]
    span = end["time"] - mark["time"]
    n = sum(r.get("iterations", 1) for r in steady)  # a row may cover several short iterations
    per_iter = {p: 1000 * per_iteration(steady, f"time_{p}") for p in PARTS}
    whole = 1000 * span / n
    before = rows[first - 1]["time"] if first else 0.0
    return {
        "env_steps": end["env_steps"],
        "iterations": end["iteration"],
        "measured_steps": end["env_steps"] - mark["env_steps"],
        "measured_s": span,
        "steps_per_s": (end["env_steps"] - mark["env_steps"]) / span,
        "first_learning_iteration_s": mark["time"] - before,  # traces and compiles the update
        "ms_per_iteration": {**per_iter, "untimed": whole - sum(per_iter.values()), "whole": whole},
        "update_ms_per_gradient_step": per_iter["update"] / gradient_steps,
        "rest_ms_per_env_step": (whole - per_iter["update"]) / train_freq,
        "run_time": end["time"],
    }


def run_rlgen(
    tmp: Path, tag: str, train_freq: int, total: int, learning_starts: int, seed: int, timeout: float, threads: int
) -> dict[str, Any]:
    spec = tmp / f"{tag}.rl.yaml"
    spec.write_text(
        SPEC.substitute(
            train_freq=train_freq,
            gradient_steps=train_freq,
            learning_starts=learning_starts,
            total_steps=total,
            seed=seed,
        )
    )
    run_dir, build_dir = tmp / f"run-{tag}", tmp / f"build-{tag}"
    args = [sys.executable, "-m", "rlgen", "run", str(spec), "--quiet", "--run-dir", str(run_dir)]
    args += ["--build-dir", str(build_dir)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if threads:
        env["TF_NUM_INTRAOP_THREADS"] = str(threads)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"ok": False, "error": last_line(proc.stderr or proc.stdout)}
    try:
        result = read_metrics(run_dir, train_freq, train_freq)
        used = json.loads((run_dir / "run.json").read_text())["threads"]["intra_op"]
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "process_s": process_s, "intra_op_threads": used, **result}


def run_sb3(
    tmp: Path, python: str, threads: int, train_freq: int, total: int, learning_starts: int, seed: int, timeout: float
) -> dict[str, Any]:
    cfg = {
        "train_freq": train_freq,
        "gradient_steps": train_freq,
        "learning_starts": learning_starts,
        "total_steps": total,
        "seed": seed,
        "threads": threads,
    }
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, "-c", SB3_SCRIPT, json.dumps(cfg)], capture_output=True, text=True, timeout=timeout, cwd=tmp
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    except OSError as exc:
        return {"ok": False, "error": f"{python}: {exc}"}
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"ok": False, "error": last_line(proc.stderr or proc.stdout)}
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    n_iter = doc["measured_steps"] / train_freq
    doc["ms_per_iteration"] = {
        "train": 1000 * doc["train_s"] / n_iter,
        "collect": 1000 * doc["collect_s"] / n_iter,
        "whole": 1000 * doc["measured_s"] / n_iter,
    }
    doc["train_ms_per_gradient_step"] = 1000 * doc["train_s"] / max(doc["measured_gradient_steps"], 1)
    doc["collect_ms_per_env_step"] = 1000 * doc["collect_s"] / doc["measured_steps"]
    return {"ok": True, "process_s": process_s, **doc}


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get("ok")]
    return statistics.median(values) if values else None


def median_parts(runs: list[dict[str, Any]]) -> dict[str, float]:
    ok = [r for r in runs if r.get("ok")]
    return {p: statistics.median(r["ms_per_iteration"][p] for r in ok) for p in ok[0]["ms_per_iteration"]} if ok else {}


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def fmt(x: float | None, spec: str = "{:,.1f}") -> str:
    return "-" if x is None else spec.format(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6000, help="env steps per run (rounded up to a multiple of N)")
    parser.add_argument("--learning-starts", type=int, default=1000, help="env steps before learning (both)")
    parser.add_argument("--settings", default="1,64", help="comma-separated N: train_freq = gradient_steps = N")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side per setting (medians)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sb3-python", default="/work/sb3-venv/bin/python", help="interpreter with SB3 and torch")
    parser.add_argument("--sb3-threads", type=int, default=0, help="torch.set_num_threads for SB3 (0: torch default)")
    parser.add_argument("--rlgen-threads", type=int, default=0, help="TF intra-op threads for rlgen (0: its own)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--json", metavar="FILE", help="save every run's figures and the medians")
    args = parser.parse_args()
    settings = [int(s) for s in args.settings.split(",")]

    print(f"SAC HalfCheetah-v5, learning starts {args.learning_starts}, {args.steps} env steps, seed {args.seed}")
    print(f"start: {load()}", flush=True)
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {n: {"rlgen": [], "sb3": []} for n in settings}
    with tempfile.TemporaryDirectory(prefix="rlgen-sac-speed-") as tmp:
        for rep in range(args.repeats):
            for n in settings:
                total = -(-args.steps // n) * n
                tag, threads = f"n{n}-r{rep}", args.rlgen_threads
                r = run_rlgen(Path(tmp), tag, n, total, args.learning_starts, args.seed, args.timeout, threads)
                runs[n]["rlgen"].append(r)
                print(
                    f"  N={n} repeat {rep}: rlgen {fmt(r.get('steps_per_s'))} steps/s"
                    + (f" (compile {r['first_learning_iteration_s']:.1f} s)" if r["ok"] else f" FAILED: {r['error']}")
                    + f"; {load()}",
                    flush=True,
                )
                s = run_sb3(
                    Path(tmp),
                    args.sb3_python,
                    args.sb3_threads,
                    n,
                    total,
                    args.learning_starts,
                    args.seed,
                    args.timeout,
                )
                runs[n]["sb3"].append(s)
                print(
                    f"  N={n} repeat {rep}: SB3   {fmt(s.get('steps_per_s'))} steps/s"
                    + (f" (torch threads {s['torch_threads']})" if s["ok"] else f" FAILED: {s['error']}")
                    + f"; {load()}",
                    flush=True,
                )
    print(f"end: {load()}\n")

    summary: dict[str, Any] = {}
    rows = []
    for n in settings:
        rl, sb = median(runs[n]["rlgen"], "steps_per_s"), median(runs[n]["sb3"], "steps_per_s")
        summary[str(n)] = {
            "train_freq": n,
            "gradient_steps": n,
            "rlgen_steps_per_s": rl,
            "sb3_steps_per_s": sb,
            "ratio": rl / sb if rl and sb else None,
            "rlgen_ms_per_iteration": median_parts(runs[n]["rlgen"]),
            "sb3_ms_per_iteration": median_parts(runs[n]["sb3"]),
            "rlgen_update_ms_per_gradient_step": median(runs[n]["rlgen"], "update_ms_per_gradient_step"),
            "sb3_train_ms_per_gradient_step": median(runs[n]["sb3"], "train_ms_per_gradient_step"),
            "rlgen_rest_ms_per_env_step": median(runs[n]["rlgen"], "rest_ms_per_env_step"),
            "sb3_collect_ms_per_env_step": median(runs[n]["sb3"], "collect_ms_per_env_step"),
        }
        rows.append([f"{n}/{n}", fmt(rl), fmt(sb), fmt(summary[str(n)]["ratio"], "{:.2f}")])
    label = "steps/s" if args.repeats == 1 else f"steps/s (median of {args.repeats})"
    print("Training speed after learning starts (first learning iteration left out)")
    print(table(["train_freq/gradient_steps", f"rlgen {label}", f"SB3 {label}", "rlgen / SB3"], rows))

    threads = {r.get("torch_threads") for n in settings for r in runs[n]["sb3"] if r.get("ok")}
    shown = ", ".join(map(str, sorted(threads))) or "-"
    used = {r.get("intra_op_threads") for n in settings for r in runs[n]["rlgen"] if r.get("ok")}
    mine = ", ".join(map(str, sorted(used))) or "-"
    print(f"(SB3 torch threads: {shown}; rlgen: TensorFlow's 1 inter-op + {mine} intra-op thread(s))")

    print("\nWhere the time goes, ms per iteration (N env steps + N gradient steps; medians)")
    header = ["N", "side", *PARTS, "untimed", "whole", "upd ms/grad step", "rest ms/env step"]
    rows = []
    for n in settings:
        s = summary[str(n)]
        p = s["rlgen_ms_per_iteration"]
        if p:
            rows.append(
                [
                    str(n),
                    "rlgen",
                    *(fmt(p[k], "{:.2f}") for k in (*PARTS, "untimed", "whole")),
                    fmt(s["rlgen_update_ms_per_gradient_step"], "{:.2f}"),
                    fmt(s["rlgen_rest_ms_per_env_step"], "{:.2f}"),
                ]
            )
        q = s["sb3_ms_per_iteration"]
        if q:
            rows.append(
                [
                    str(n),
                    "SB3",
                    *(["-"] * 3),
                    fmt(q["train"], "{:.2f}"),
                    *(["-"] * 3),
                    "-",
                    fmt(q["whole"], "{:.2f}"),
                    fmt(s["sb3_train_ms_per_gradient_step"], "{:.2f}"),
                    fmt(s["sb3_collect_ms_per_env_step"], "{:.2f}"),
                ]
            )
    print(table(header, rows))
    print(
        "(rlgen: time_* of the metrics rows; untimed = whole - their sum. SB3: update = train(), "
        "rest = everything else (acting, env, storing, callbacks).)"
    )

    if args.json:
        doc = {"args": vars(args), "summary": summary, "runs": {str(n): runs[n] for n in settings}}
        Path(args.json).write_text(json.dumps(doc, indent=2))
        print(f"\nsaved {args.json}")


if __name__ == "__main__":
    main()
