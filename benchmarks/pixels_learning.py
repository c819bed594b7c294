"""PPO (or DQN) on Atari Breakout, rlgen against Stable-Baselines3 on the same env, budget and
seeds: the evaluated game score along the way and at the end (issue 32's learning targets).

    .venv/bin/python benchmarks/pixels_learning.py --sb3-python /path/to/sb3-venv/bin/python \\
        --work runs/pixels-learning --seeds 1,2,3 [--steps 499712] [--final-episodes 10]
    .venv/bin/python benchmarks/pixels_learning.py --read --work runs/pixels-learning --seeds 1
    .venv/bin/python benchmarks/pixels_learning.py --read --eval-unfinished --work runs/pixels-learning --seeds 1

For each seed it trains both sides at once (``--one-at-a-time``: one after the other), each the
whole budget (``--steps`` env steps, whole iterations of 1,024; the linear lr and clip schedules
run over it on both sides):

- rlgen: ``python -m rlgen run examples/ppo-breakout.rl.yaml --seed N --set
  train.total_steps=STEPS --run-dir WORK/seedN/rlgen --quiet``; the spec evaluates 5 games with
  sampled actions every 100,352 env steps and once more at the end (``metrics.jsonl``);
- SB3: ``SB3_PYTHON benchmarks/sb3_atari.py --learn-steps STEPS --seed N --out
  WORK/seedN/sb3.jsonl``: PPO ``CnnPolicy`` with the Zoo's settings, evaluated at the same steps
  the same way, and twice at the end over ``--final-episodes`` games (sampled actions, and the
  likeliest action).

With ``--algo dqn`` the same for DQN with the Zoo's Atari settings (one env, replay 100k,
learning from 100k steps): rlgen runs ``examples/dqn-pong.rl.yaml`` with ``--set
env.id=ALE/Breakout-v5 --set train.eval.every=100352``, SB3 ``sb3_atari.py --algo dqn``; the
periodic evaluations take the greedy action on both sides (the example's ``deterministic:
true``), and a stopped SB3 run resumes with its replay buffer (``sb3_atari.py``).

Then the final evaluation of rlgen's exported policy, ``rlgen eval WORK/seedN/rlgen --episodes
N --json`` (the likeliest action; kept in ``WORK/seedN/rlgen-eval.json`` so that ``--read`` runs
it once). ``--read`` trains nothing: it reads the runs already in WORK (an unfinished run shows
what it reached; with ``--eval-unfinished`` it also evaluates a stopped rlgen run's policy where
it stopped, and ``sb3_atari.py --eval-only`` does SB3's). A stopped run goes on with ``rlgen run
--resume WORK/seedN/rlgen`` and ``sb3_atari.py ... --resume``.

The table gives, per seed and side, each evaluation's game score (mean ± sd over its games,
numpy's sd), the training games' mean score over the last 100 games, env steps and training
time. Then come the training games' last-100 mean at each evaluation's step and where both sides
of a seed got to (unfinished runs compare at equal steps), and the spread over seeds; the verdict
compares rlgen's final evaluation with SB3's seeds' range. Scores are always whole games (all
lives) and unclipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning import SeedResult, _env, _f, _mean_std, _table, final_eval, read_run  # beside this script

ROOT = Path(__file__).resolve().parent.parent
SB3_SCRIPT = ROOT / "benchmarks" / "sb3_atari.py"
EVAL_EVERY = 100_352  # the PPO spec's train.eval.every, and sb3_atari.py's --eval-every default


@dataclass(frozen=True)
class Algo:
    """What one algorithm's comparison runs: rlgen's spec (with ``sets``), SB3's side, the step
    granularity (an iteration's env steps) and the settings both sides share."""

    name: str
    spec: Path
    sets: tuple[str, ...]
    iteration: int
    envs: int
    settings: str
    #: the periodic evaluations' actions: sampled (PPO) or greedy (DQN, as its example's eval)
    sampled: bool = True


ALGOS = {
    "ppo": Algo(
        "PPO",
        ROOT / "examples" / "ppo-breakout.rl.yaml",
        (),
        1024,
        8,
        "PPO (Zoo): 128 steps x 8 envs, 4 epochs of minibatch 256, lr 2.5e-4 and clip 0.1 linear to 0, "
        "vf 0.5, ent 0.01; Nature CNN shared by policy and value.",
    ),
    "dqn": Algo(
        "DQN",
        ROOT / "examples" / "dqn-pong.rl.yaml",
        ("env.id=ALE/Breakout-v5", f"train.eval.every={EVAL_EVERY}", "train.checkpoint.every=100000"),
        4,
        1,
        "DQN (Zoo): 1 env, replay 100k, learning from 100k steps, a gradient step of 32 every 4 env "
        "steps, target every 1,000, lr 1e-4, epsilon 1 to 0.01 over the first 10% of the budget; "
        "Nature CNN. rlgen: examples/dqn-pong.rl.yaml on Breakout.",
        sampled=False,
    ),
}


def env_line(algo: Algo) -> str:
    return (
        "env: ALE/Breakout-v5 (v5: sticky actions 0.25, full action set off: 4 actions), made with "
        "frameskip=1; frame skip 4 (max of the last 2 frames) by the wrapper, up to 30 no-ops on reset, "
        "a lost life ends a training episode, FIRE then 2 at the start of every life, training rewards "
        f"clipped to their sign, 84x84 grey, 4 frames stacked (uint8 [4,84,84]); {algo.envs} env(s). "
        "rlgen: the `atari` preset (gymnasium's AtariPreprocessing and rlgen's wrappers). SB3: "
        "make_atari_env's AtariWrapper + VecFrameStack(4). Scores: whole games, unclipped. " + algo.settings
    )


@dataclass
class Eval:
    step: int
    mean: float
    sd: float
    games: int


@dataclass
class Side:
    """One side's run of one seed."""

    name: str
    seed: int
    evals: list[Eval] = field(default_factory=list)  # sampled actions, along the way and at the end
    final: Eval | None = None  # --final-episodes games, the likeliest action
    final_sampled: Eval | None = None  # SB3 only: --final-episodes games, sampled actions
    train_last100: float | None = None
    train_games: int = 0
    #: (env steps, the training games' mean score over the last 100 by then): SB3's after every
    #: game, rlgen's at every metrics row (every 10 iterations)
    train_curve: list[tuple[int, float]] = field(default_factory=list)
    env_steps: int = 0
    train_s: float | None = None
    finished: bool = False
    note: str = ""

    def train_at(self, step: int) -> float | None:
        """The last 100 training games' mean score by ``step`` (None past the run's end)."""
        by = [mean for at, mean in self.train_curve if at <= step]
        return by[-1] if by and step <= self.env_steps else None


def _eval(step: int, scores: list[float]) -> Eval:
    return Eval(step, statistics.fmean(scores), statistics.pstdev(scores), len(scores))


def read_sb3(path: Path, seed: int) -> Side:
    """The JSON lines ``sb3_atari.py --learn-steps`` writes (as far as they go)."""
    side = Side("SB3", seed)
    if not path.exists():
        side.note = f"no {path}"
        return side
    games: list[float] = []
    steps: list[int] = []
    for line in path.read_text().splitlines():
        rec: dict[str, Any] = json.loads(line) if line.strip() else {}
        kind = rec.get("kind")
        if kind == "episode":
            games.append(rec["score"])
            steps.append(rec["step"])
            side.env_steps = max(side.env_steps, rec["step"])
        elif kind == "eval":
            ev = _eval(rec["step"], rec["scores"])
            if not rec["final"]:
                side.evals.append(ev)
            elif rec.get("deterministic"):
                side.final = ev
            else:
                side.final_sampled = ev
            side.env_steps = max(side.env_steps, rec["step"])
        elif kind == "stopped":  # SIGTERM: the model saved at this step (sb3_atari.py --resume goes on)
            side.env_steps, side.train_s = max(side.env_steps, rec["step"]), rec["wall_s"]
        elif kind == "done":
            side.finished, side.env_steps, side.train_s = True, rec["step"], rec["wall_s"]
    side.train_games = len(games)
    side.train_last100 = statistics.fmean(games[-100:]) if games else None
    side.train_curve = [(at, statistics.fmean(games[max(0, i - 99) : i + 1])) for i, at in enumerate(steps)]
    if side.final_sampled is not None:  # the curve's end: sampled actions, as rlgen's closing evaluation
        side.evals.append(side.final_sampled)
    return side


def read_rlgen(run_dir: Path, seed: int, episodes: int, timeout: float, unfinished: bool = False) -> Side:
    """A run directory's evaluations and training games; the final evaluation (``rlgen eval``)
    from ``rlgen-eval.json`` beside it, run and kept there when the run has finished (with
    ``unfinished``: of the policy a stopped run exported where it stopped, too)."""
    side = Side("rlgen", seed)
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        side.note = f"no {metrics}"
        return side
    result = SeedResult(run_dir.name, seed, ok=True)
    read_run(result, run_dir, target=float("inf"))
    side.env_steps, side.train_s, side.train_last100 = result.env_steps, result.train_time, result.final_return
    side.train_games = result.episodes
    rows = [json.loads(ln) for ln in metrics.read_text().splitlines() if ln.strip()]
    side.train_curve = [(r["env_steps"], r["mean_return"]) for r in rows if r.get("mean_return") is not None]
    run = json.loads((run_dir / "run.json").read_text())
    per_eval = run["config"]["eval_episodes"]
    side.evals = [
        Eval(int(r.get("eval_env_steps", r["env_steps"])), r["eval_mean_return"], r["eval_std_return"], per_eval)
        for r in rows
        if r.get("eval_mean_return") is not None
    ]
    closing = run.get("final_eval") or {}
    if closing.get("mean_return") is not None and all(e.step != result.env_steps for e in side.evals):
        # the closing evaluation at the run's end (run.json; the metrics rows hold the periodic ones)
        side.evals.append(Eval(result.env_steps, closing["mean_return"], closing.get("std", 0.0), per_eval))
    side.finished = run.get("status") == "finished" and (run_dir / "policy" / "saved_model.pb").is_file()
    cache = run_dir.parent / "rlgen-eval.json"
    if (side.finished or unfinished) and episodes > 0 and (run_dir / "policy" / "saved_model.pb").is_file():
        if not cache.exists() or json.loads(cache.read_text()).get("env_steps") != side.env_steps:
            final_eval(result, run_dir, episodes, timeout)
            if result.final_eval is None:
                side.note = f"rlgen eval failed: {result.extra.get('final_eval_error')}"
                return side
            doc = {"episodes": episodes, "mean": result.final_eval, "sd": result.final_eval_std}
            cache.write_text(json.dumps({**doc, "env_steps": side.env_steps}))
        doc = json.loads(cache.read_text())
        side.final = Eval(side.env_steps, doc["mean"], doc["sd"], doc["episodes"])
    return side


def commands(algo: Algo, seed: int, steps: int, base: Path, sb3_python: str, final_episodes: int) -> list[list[str]]:
    """rlgen's and SB3's command lines for one seed, writing into ``base``."""
    rlgen = [sys.executable, "-m", "rlgen", "run", str(algo.spec), "--seed", str(seed)]
    for setting in (f"train.total_steps={steps}", *algo.sets):
        rlgen += ["--set", setting]
    rlgen += ["--run-dir", str(base / "rlgen"), "--quiet"]
    sb3 = [sb3_python, str(SB3_SCRIPT), "--algo", algo.name.lower(), "--learn-steps", str(steps)]
    sb3 += ["--seed", str(seed), "--out", str(base / "sb3.jsonl"), "--final-episodes", str(final_episodes)]
    return [rlgen, sb3]


def train(
    algo: Algo, seed: int, steps: int, work: Path, sb3_python: str, final_episodes: int, parallel: bool, timeout: float
) -> None:
    """Train both sides of ``seed`` (logs in ``WORK/seedN/*.log``)."""
    base = work / f"seed{seed}"
    base.mkdir(parents=True, exist_ok=True)
    rlgen, sb3 = commands(algo, seed, steps, base, sb3_python, final_episodes)
    procs = []
    for name, cmd in (("rlgen", rlgen), ("sb3", sb3)):
        print(f"seed {seed}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        with open(base / f"{name}.log", "w") as log:
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT))
        if not parallel:
            procs[-1].wait(timeout)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            print(f"seed {seed}: {proc.args[0]} ... timed out after {timeout:.0f} s", file=sys.stderr)


def _cell(ev: Eval | None, games: int | None = None) -> str:
    if ev is None:
        return "-"
    return f"{ev.mean:.1f} ± {ev.sd:.1f}" + (f" ({ev.games})" if games is not None and ev.games != games else "")


def _spread(xs: list[float]) -> str:
    return f"{_mean_std(xs)} [{min(xs):.1f}, {max(xs):.1f}]" if xs else "-"


def verdict(rlgen: list[float], sb3: list[float]) -> str:
    """rlgen's final evaluation (mean over its seeds) against SB3's seeds' range."""
    if not rlgen or not sb3:
        return "no verdict: a side has no final evaluation"
    ours, low, high = statistics.fmean(rlgen), min(sb3), max(sb3)
    where = "above" if ours > high else "within" if ours >= low else "below"
    return f"rlgen {ours:.1f} is {where} SB3's seed range [{low:.1f}, {high:.1f}] ({len(sb3)} seed(s))"


def report(sides: list[Side], steps: int, final_episodes: int, algo: Algo = ALGOS["ppo"]) -> str:
    points = sorted({e.step for s in sides for e in s.evals})
    per_eval = next((e.games for s in sides for e in s.evals if e.step % EVAL_EVERY == 0), 5)
    head = ["seed", "side", *[f"{p:,}" for p in points], f"final ({final_episodes}, likeliest)", "train last 100"]
    head += ["env steps", "train s"]
    rows = []
    for s in sides:
        by_step = {e.step: e for e in s.evals}
        cells = [_cell(by_step.get(p), per_eval) for p in points]
        last100 = f"{_f(s.train_last100)} ({s.train_games} games)" if s.train_last100 is not None else "-"
        env = f"{s.env_steps:,}" + ("" if s.finished else " (unfinished)")
        rows.append([str(s.seed), s.name, *cells, _cell(s.final), last100, env, _f(s.train_s, "{:.0f}")])
    # the training games along the way, at the same steps, and where both sides of a seed got to
    reached = {seed: min(s.env_steps for s in sides if s.seed == seed) for seed in {s.seed for s in sides}}
    curve_points = sorted(set(points) | {r for r in reached.values() if r})
    curve = []
    for s in sides:
        curve.append([str(s.seed), s.name, *[_f(s.train_at(p)) for p in curve_points]])
    lines = [
        f"{algo.name} Breakout, rlgen vs SB3: budget {steps:,} env steps; seeds {sorted({s.seed for s in sides})}",
        env_line(algo),
        f"eval columns: env steps; game score mean ± sd over {per_eval} games with "
        + ("sampled actions" if algo.sampled else "the greedy action")
        + f" (rlgen: spec train.eval, SB3: evaluate_policy deterministic={not algo.sampled}); the last "
        f"column at the end is rlgen's closing evaluation and SB3's {final_episodes}-game one (games in "
        f"brackets where not {per_eval}); 'final': {final_episodes} games with the likeliest action "
        "(rlgen eval of the exported policy; SB3 evaluate_policy deterministic=True).",
        _table(head, rows),
        "",
        "training games' mean score over the last 100 by these env steps (the last column: where every "
        "side of a seed got to):",
        _table(["seed", "side", *[f"{p:,}" for p in curve_points]], curve),
        "",
        "over seeds (mean ± sd [min, max]):",
    ]
    spread = []
    for name in ("rlgen", "SB3"):
        mine = [s for s in sides if s.name == name]
        finals = [s.final.mean for s in mine if s.final is not None]
        lasts = [s.evals[-1].mean for s in mine if s.evals]
        trains = [s.train_last100 for s in mine if s.train_last100 is not None]
        spread.append([name, _spread(finals), _spread(lasts), _spread(trains)])
    lines.append(_table(["side", "final eval", "last sampled eval", "train last 100"], spread))
    sb3_sampled = [s.final_sampled for s in sides if s.name == "SB3" and s.final_sampled is not None]
    if sb3_sampled:
        lines.append(
            f"SB3's {final_episodes}-game final evaluation with sampled actions: "
            + ", ".join(f"seed {s.seed} {_cell(s.final_sampled)}" for s in sides if s.final_sampled is not None)
        )
    finals = {n: [s.final.mean for s in sides if s.name == n and s.final is not None] for n in ("rlgen", "SB3")}
    lines.append("verdict (final eval): " + verdict(finals["rlgen"], finals["SB3"]))
    if any(s.final is not None and not s.finished for s in sides):
        lines.append("runs unfinished: a final evaluation is of the policy where its run stopped (env steps above)")
    lines += [f"note: seed {s.seed} {s.name}: {s.note}" for s in sides if s.note]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", choices=sorted(ALGOS), default="ppo", help="ppo (default) or dqn")
    ap.add_argument("--work", required=True, help="WORK: seedN/rlgen (run dir), seedN/sb3.jsonl, logs")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    ap.add_argument("--steps", type=int, default=499_712, help="env steps a run trains (default 499712: 488 x 1024)")
    ap.add_argument("--final-episodes", type=int, default=10, help="games of the final evaluations (default 10)")
    ap.add_argument("--read", action="store_true", help="train nothing: read the runs already in WORK")
    ap.add_argument("--sb3-python", help="an interpreter with stable-baselines3, torch and ale-py (to train)")
    ap.add_argument(
        "--eval-unfinished",
        action="store_true",
        help="--read: also run rlgen eval on a stopped run's policy (SB3's: sb3_atari.py --eval-only)",
    )
    ap.add_argument("--one-at-a-time", action="store_true", help="train the two sides one after the other")
    ap.add_argument("--timeout", type=float, default=4 * 3600.0, help="seconds a seed's training may take")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    args = ap.parse_args()
    algo = ALGOS[args.algo]
    if args.steps % algo.iteration:
        ap.error(f"--steps: whole iterations of {algo.iteration:,} env steps ({algo.name})")
    if not args.read and not args.sb3_python:
        ap.error("--sb3-python is needed to train (or --read)")
    work = Path(args.work).resolve()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    sides: list[Side] = []
    for seed in seeds:
        if not args.read:
            parallel = not args.one_at_a_time
            train(algo, seed, args.steps, work, args.sb3_python, args.final_episodes, parallel, args.timeout)
        base = work / f"seed{seed}"
        sides.append(read_rlgen(base / "rlgen", seed, args.final_episodes, args.timeout, args.eval_unfinished))
        sides.append(read_sb3(base / "sb3.jsonl", seed))
    print(report(sides, args.steps, args.final_episodes, algo))
    if args.json:
        from dataclasses import asdict

        doc = {"algo": algo.name, "steps": args.steps, "env": env_line(algo), "sides": [asdict(s) for s in sides]}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
