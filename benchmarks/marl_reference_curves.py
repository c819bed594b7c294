"""rlgen's MAPPO against the reference MAPPO trainer on the reference's env: both curves, one
table, one plot.

Inputs are finished runs, not new training: rlgen's run directories (``metrics.jsonl``: the
rolling mean of the last 100 episodes' per-agent mean return, every iteration of 3,200 joint
steps) from ``benchmarks/marl_learning.py --set env.backend=tensorflow --set
env.kwargs.reward=reference --set env.kwargs.physics=mpe --set env.kwargs.local_ratio=0``, and
the reference trainer's logs (marlbenchmark/on-policy's ``train_mpe.py``: every 5 updates of
3,200 steps, "average episode rewards", the mean per-agent step reward of the last rollout x 25;
every agent gets the team's sum there, as in rlgen's ``reward: reference``), as
``LABEL=LOG[,LOG...]`` (one log per seed).

For every curve and seed it prints the mean of the points in a window of 64k steps ending at
0.5M, 1M and 1.5M (``--points``), and in the last 5% of the budget (``--steps``; 1.9M to 2M,
rlgen's marl_learning "late mean"); then the mean over seeds. With ``--plot FILE`` it draws every
seed's curve, one colour a curve (matplotlib, the ``plot`` extra).

    python benchmarks/marl_reference_curves.py --rlgen DIR[,DIR...] [--rlgen 'LABEL=DIR,...'] \\
        --reference 'rmappo (GRU)=seed1.log,seed2.log' --reference 'mappo (MLP)=seed1.log' \\
        [--steps 2000000] [--points 500000,1000000,1500000] [--plot docs/img/marl-reference-2m.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from reference_mappo import reference_curve  # the reference log's format, beside this script

WINDOW = 64_000


def rlgen_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(env steps, mean return) of an rlgen run's metrics rows."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["env_steps"], r["mean_return"]) for r in rows if r.get("mean_return") is not None]


def window_mean(curve: list[tuple[int, float]], end: int, width: int) -> float | None:
    points = [v for s, v in curve if end - width < s <= end]
    return statistics.mean(points) if points else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rlgen",
        action="append",
        required=True,
        help="[LABEL=]DIR[,DIR...]: rlgen run directories (one per seed; label 'MAPPO (MLP)' unless given)",
    )
    ap.add_argument("--reference", action="append", default=[], help="LABEL=LOG[,LOG...] (one log per seed)")
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--points", default="500000,1000000,1500000", help="env steps the 64k-step windows end at")
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args()
    curves: dict[str, list[tuple[str, list[tuple[int, float]]]]] = {}
    for item in args.rlgen:
        label, dirs = item.split("=", 1) if "=" in item else ("MAPPO (MLP)", item)
        curves[f"rlgen {label}"] = [(Path(d).name, rlgen_curve(Path(d))) for d in dirs.split(",")]
    for item in args.reference:
        label, logs = item.split("=", 1)
        curves[f"reference {label}"] = [(Path(log).name, reference_curve(Path(log))) for log in logs.split(",")]
    ends = [(f"{x / 1e6:g}M", x, WINDOW) for x in (int(p) for p in args.points.split(","))]
    ends.append((f"last 5% to {args.steps / 1e6:.4g}M", args.steps, args.steps // 20))
    print(f"window means: {WINDOW:,} steps ending at each point; the last: the last 5% of {args.steps:,} steps")
    head = f"{'curve':<26} {'seed':<26}" + "".join(f"{name:>18}" for name, *_ in ends)
    print(head)
    print("-" * len(head))
    for label, runs in curves.items():
        per_end: list[list[float]] = [[] for _ in ends]
        for name, curve in runs:
            cells = []
            for k, (_, end, width) in enumerate(ends):
                v = window_mean(curve, end, width) if curve and curve[-1][0] >= end - width // 2 else None
                cells.append(f"{v:>18.1f}" if v is not None else f"{'-':>18}")
                if v is not None:
                    per_end[k].append(v)
            print(f"{label:<26} {name:<26}" + "".join(cells))
        if len(runs) > 1:
            cells = "".join(f"{statistics.mean(v):>12.1f} (n={len(v)})" if v else f"{'-':>18}" for v in per_end)
            print(f"{label:<26} {'mean over seeds':<26}" + cells)
    if args.plot is not None:
        plot(curves, args.plot, args.steps)
        print(f"plot: {args.plot}")


def plot(curves: dict, path: Path, steps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (label, runs), color in zip(
        curves.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"), strict=False
    ):
        for k, (_, curve) in enumerate(runs):
            xs, ys = zip(*curve, strict=True) if curve else ((), ())
            ax.plot(xs, ys, color=color, lw=0.6, alpha=0.45, label=label if k == 0 else None)
    ax.set_xlim(0, steps)
    ax.set_xlabel("joint env steps")
    ax.set_ylabel("team reward per 25-step episode (training)")
    ax.set_title("MAPPO on the reference simple_spread (team reward, landmarks 0.8·U(−1,1)), 128 envs")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
