"""``rlgen plot RUN_DIR... [-o FILE]``: learning curves from run directories, with matplotlib.

One figure. Top: the mean training return (over the spec's stop window) against env
steps and against training time, periodic evaluations marked. Bottom: the learner's
losses (PPO/A2C: policy loss, value loss, entropy, explained variance; DQN: loss and
Q; SAC/TD3: critic and actor loss, the entropy coefficient, Q) against env steps. Several
runs are overlaid; runs whose specs differ only by their seed are drawn as one curve, the
mean over the seeds with a band from the lowest to the highest, on a common grid up to the
shortest of them.

Every run ``rlgen run`` finishes also gets ``curves.png`` in its run directory, drawn by a
detached ``rlgen plot`` once the run is done. matplotlib is the ``plot`` extra
(``scripts/setup.sh`` installs it); without it ``rlgen plot`` says how to install it, and
runs skip ``curves.png``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlgen.runtime.rundir import RunDir

#: Losses drawn in the bottom row, in this order, when a run logs them.
LOSSES = (  # the learners' metrics drawn, at most four: PPO/A2C's, DQN's, SAC/TD3's
    "policy_loss",
    "value_loss",
    "entropy",
    "explained_variance",
    "loss",
    "critic_loss",
    "actor_loss",
    "ent_coef",
    "q",
)
GRID = 200  # points of a seed group's common grid


class PlotError(Exception):
    """A run directory that cannot be plotted (the message says which and why)."""


@dataclass
class Run:
    path: Path
    rows: list[dict[str, Any]]
    label: str
    seed: int | None
    key: str  # the spec without its seed (and where the run is written): runs differing only by seed share it
    losses: list[str] = field(default_factory=list)
    final: dict[str, float] | None = None  # the final evaluation (run.json), at its env steps and time


def read_run(path: Path) -> Run:
    from rlgen.runtime.metricslog import read_metrics

    if not RunDir(path).metrics.is_file():
        raise PlotError(f"{path}: not a run directory (no metrics.jsonl)")
    rows = read_metrics(path)
    if not rows:
        raise PlotError(f"{path}: metrics.jsonl has no iterations yet")
    run = _json(RunDir(path).run_json)
    spec = _json(path / "spec.resolved.json")
    train = dict(spec.get("train") or {})
    seed = train.pop("seed", None)
    train.pop("run_dir", None)
    keyed = {**spec, "train": train, "overrides": None}
    policy = run.get("policy") or (spec.get("deploy") or {}).get("policy", "")
    workers = run.get("workers") or (spec.get("deploy") or {}).get("workers", 1)
    label = str(spec.get("name") or run.get("name") or path.name)
    if policy and policy != "single":
        label += f" ({policy}, {workers})"
    key = json.dumps(keyed, sort_keys=True, default=str) + f"|{policy}|{workers}" if spec else str(path)
    losses = [k for k in LOSSES if any(r.get(k) is not None for r in rows)]
    final = (run.get("final_eval") or {}).get("mean_return")
    at = {"env_steps": run.get("env_steps", rows[-1]["env_steps"]), "time": run.get("elapsed", rows[-1]["time"])}
    return Run(path, rows, label, seed, key, losses, {**at, "eval_mean_return": final} if final is not None else None)


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def groups(runs: list[Run]) -> list[list[Run]]:
    """Runs grouped by spec without the seed, in the order first seen."""
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(r.key, []).append(r)
    return list(out.values())


def _series(run: Run, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    pts = [(r[x], r[y]) for r in run.rows if r.get(x) is not None and r.get(y) is not None]
    if not pts:
        return np.zeros(0), np.zeros(0)
    a = np.asarray(pts, dtype=float)
    return a[:, 0], a[:, 1]


def _draw(ax: Any, group: list[Run], x: str, y: str, color: Any, label: str | None) -> None:
    series = [s for s in (_series(r, x, y) for r in group) if len(s[0])]
    if not series:
        return
    if len(series) == 1:
        ax.plot(*series[0], color=color, label=label, linewidth=1.4)
        return
    end = min(s[0][-1] for s in series)
    start = max(s[0][0] for s in series)
    grid = np.linspace(start, end, GRID) if end > start else np.asarray([end])
    values = np.stack([np.interp(grid, sx, sy) for sx, sy in series])
    ax.plot(grid, values.mean(axis=0), color=color, label=label, linewidth=1.4)
    ax.fill_between(grid, values.min(axis=0), values.max(axis=0), color=color, alpha=0.2, linewidth=0)


def _eval_points(run: Run, x: str) -> tuple[np.ndarray, np.ndarray]:
    """Evaluations at the policy they evaluated: a row's ``eval_env_steps`` (a result from the
    evaluator process lands some iterations later), and the time that snapshot was taken."""
    time_at = {r["env_steps"]: r.get("time") for r in run.rows}
    pts = []
    for r in run.rows:
        if r.get("eval_mean_return") is None:
            continue
        steps = r.get("eval_env_steps", r["env_steps"])
        at = steps if x == "env_steps" else time_at.get(steps, r.get(x))
        if at is not None:
            pts.append((at, r["eval_mean_return"]))
    a = np.asarray(pts, dtype=float).reshape(-1, 2)
    return a[:, 0], a[:, 1]


def _evals(ax: Any, group: list[Run], x: str, color: Any) -> None:
    for r in group:
        sx, sy = _eval_points(r, x)
        if r.final is not None:  # the final policy's evaluation, after the last iteration
            sx, sy = np.append(sx, r.final[x]), np.append(sy, r.final["eval_mean_return"])
        if len(sx):
            ax.scatter(sx, sy, color=color, marker="D", s=22, zorder=3, edgecolors="black", linewidths=0.6)


def plot(paths: list[Path], out: Path) -> Path:
    """Draw the runs at ``paths`` into ``out`` (.png, .svg or .pdf); returns ``out``."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotError(
            "rlgen plot needs matplotlib: install the plot extra (pip install 'rlgen[plot]'; scripts/setup.sh does)"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.ticker
    from matplotlib import pyplot as plt

    runs = [read_run(p) for p in paths]
    grouped = groups(runs)
    losses = [k for k in LOSSES if any(k in r.losses for r in runs)][:4]
    cols = max(2, len(losses))
    fig = plt.figure(figsize=(3.4 * cols, 7.2 if losses else 3.8))
    # a fixed layout: matplotlib's constrained layout would double the drawing time
    grid = fig.add_gridspec(
        2 if losses else 1, 2 * cols, left=0.06, right=0.98, top=0.95, bottom=0.08, wspace=1.1, hspace=0.32
    )
    steps_ax = fig.add_subplot(grid[0, :cols])
    time_ax = fig.add_subplot(grid[0, cols:])
    loss_axes = [fig.add_subplot(grid[1, 2 * j : 2 * j + 2]) for j in range(len(losses))]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = [g[0].label for g in grouped]
    for i, group in enumerate(grouped):
        color = colors[i % len(colors)]
        seeds = f", {len(group)} seeds: mean, min-max" if len(group) > 1 else ""
        where = f" [{group[0].path.name}]" if names.count(group[0].label) > 1 else ""  # same name, other settings
        label = group[0].label + where + seeds
        _draw(steps_ax, group, "env_steps", "mean_return", color, label)
        _draw(time_ax, group, "time", "mean_return", color, None)
        _evals(steps_ax, group, "env_steps", color)
        _evals(time_ax, group, "time", color)
        for ax, key in zip(loss_axes, losses, strict=True):
            _draw(ax, group, "env_steps", key, color, None)
    for ax, key in zip(loss_axes, losses, strict=True):
        ax.set_title(key.replace("_", " "), fontsize=10)
        ax.set_xlabel("env steps")
    steps_ax.set_title("mean training return (diamonds: evaluations)", fontsize=10)
    steps_ax.set_xlabel("env steps")
    steps_ax.set_ylabel("return")
    time_ax.set_title("against training time", fontsize=10)
    time_ax.set_xlabel("seconds")
    steps_ax.legend(fontsize=8, loc="lower right")
    thousands = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}")
    for ax in fig.axes:
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        if ax is not time_ax:
            ax.xaxis.set_major_formatter(thousands)
    out.parent.mkdir(parents=True, exist_ok=True)
    aside = out.with_name(f".{out.name}.{os.getpid()}")  # whole or not at all: a reader never sees half
    try:
        fig.savefig(aside, dpi=110, format=out.suffix[1:].lower())
        os.replace(aside, out)
    finally:
        plt.close(fig)
        aside.unlink(missing_ok=True)
    return out


def draw(run_dirs: list[Path], out: Path | None = None) -> Path:
    """``rlgen plot``: the curves of ``run_dirs`` in ``out`` (default the first run's
    ``curves.png``); :class:`UsageError` for an unknown format or unreadable runs."""
    from .errors import UsageError

    out = out or RunDir(run_dirs[0]).curves
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"{out}: write a .png, .svg or .pdf")
    try:
        return plot(run_dirs, out)
    except PlotError as exc:
        raise UsageError(str(exc)) from None
