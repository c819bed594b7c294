"""What this machine has measured for a spec: env steps/s per policy and worker count, kept across runs.

Every run that ``rlgen run`` finishes (``--policy auto``'s calibrations and ``rlgen bench``'s
rows included) adds its steady speed to a small JSON file in the cache
(``$RLGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlgen``, else ``~/.cache/rlgen``; under
``auto/``), and a ``single`` run its time per part as well: the profile the cost model
predicts the other policies from. ``--policy auto`` reads the file before it starts
(:meth:`rlgen.app.auto.Chooser.recall`), so a spec measured on this machine before starts
straight under its fastest measured policy, with no calibration and no restart.

The file is keyed by what decides speed and nothing else: the spec with its training
length, seed, stop target, evaluation, checkpoints, logging, name and deployment left out,
the hosts, this machine (hostname, cores, CPU model, GPU models) and the versions of rlgen,
TensorFlow and Horovod. Inside it, speeds are kept per policy, worker count and placement
(:func:`rlgen.dsl.devices.placement`: the sides not on the CPU, e.g. ``learner=gpu``; entries
written before placements were kept, and every all-CPU run, read as the CPU). Each keeps its
last :data:`KEEP` measurements and speaks with their median; measurements older than
:data:`MAX_AGE_DAYS` are forgotten.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgen.machine import cache_dir, cpu, gpu_models, local_cores, tensorflow_version, version
from rlgen.runtime.clock import CATEGORIES as PARTS  # the parts a run times; a single run keeps each one's time

#: Measurements kept per policy and worker count (the median of them is used).
KEEP = 5
#: Measurements older than this are forgotten.
MAX_AGE_DAYS = 30
#: Steady iterations (after the first) a run needs before its speed is kept.
MIN_ITERATIONS = 3
#: ``train`` settings that do not change the speed of an iteration.
_UNTIMED_TRAIN = ("total_steps", "seed", "stop", "eval", "checkpoint", "log", "run_dir")


def machine() -> dict[str, Any]:
    from rlgen import __version__

    out = {
        "hostname": socket.gethostname(),
        "cores": local_cores(),
        "cpu": cpu()[0],
        "rlgen": __version__,
        "tensorflow": tensorflow_version(),
        "horovod": version("horovod"),
    }
    gpus = gpu_models()
    return {**out, "gpu": gpus} if gpus else out  # CPU machines keep their keys


def key_of(spec: dict[str, Any], hosts: Sequence[str]) -> str:
    """The key of a resolved spec (``spec.resolved.json``) run on ``hosts`` from this machine."""
    timed = {k: v for k, v in spec.items() if k not in ("name", "description", "deploy", "overrides")}
    timed["train"] = {k: v for k, v in (spec.get("train") or {}).items() if k not in _UNTIMED_TRAIN}
    doc = {"spec": timed, "hosts": sorted(hosts), "machine": machine()}
    # deploy.devices is left out like the rest of deploy: a speed is kept with its placement
    # inside the file (History.add), so auto finds a spec's CPU and GPU placements together
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:24]


def ran(policy: str, workers: int, devices: str = "") -> tuple[Any, ...]:
    """The key :meth:`History.measured` gives a measurement: ``(policy, workers)``, and its
    placement third where some side is not on the CPU (``devices``, as
    :func:`rlgen.dsl.devices.placement` writes it)."""
    return (policy, workers, devices) if devices else (policy, workers)


@dataclass(frozen=True)
class Measured:
    """A policy's speed on this machine: the median of its kept measurements."""

    steps_per_s: float
    runs: int
    parts: dict[str, float]  # seconds per iteration per part (``single`` only; else empty)
    steps_per_iteration: int
    threads: int = 1  # intra-op threads its inference and update ran on (``single`` only)


def speed_of(rows: Sequence[dict[str, Any]]) -> tuple[float, dict[str, float], int] | None:
    """Steady steps/s (the median over rows after the first, whose iteration traces), time per
    part per iteration and steps per iteration of a run's metric rows (a row may cover several
    short iterations: ``iterations``); None when too few iterations ran."""
    covered = sum(int(row.get("iterations", 1)) for row in rows[1:])
    if covered < MIN_ITERATIONS:
        return None
    rates, parts = [], {p: [] for p in PARTS}
    for before, row in zip(rows, rows[1:], strict=False):
        span, steps = row["time"] - before["time"], row["env_steps"] - before["env_steps"]
        if span > 0 and steps > 0:
            rates.append(steps / span)
        for p in PARTS:
            parts[p].append(float(row.get(f"time_{p}", 0.0)) / max(1, int(row.get("iterations", 1))))
    if not rates:
        return None
    per_iteration = (rows[-1]["env_steps"] - rows[0]["env_steps"]) // covered
    return statistics.median(rates), {p: statistics.median(v) for p, v in parts.items()}, per_iteration


class History:
    """The measurements kept for one key (one spec on one machine and set of hosts)."""

    def __init__(self, key: str, directory: Path | None = None) -> None:
        self.key = key
        self.path = (directory or cache_dir()) / "auto" / f"{key}.json"

    def _read(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def add(
        self,
        policy: str,
        workers: int,
        rows: Sequence[dict[str, Any]],
        spec_name: str = "",
        devices: str = "",
        threads: int = 1,
    ) -> bool:
        """Keep the speed of a run's rows under ``policy`` on ``workers`` placed on ``devices``
        (:func:`ran`), and a ``single`` run's intra-op ``threads``; False when too short."""
        speed = speed_of(rows)
        if speed is None:
            return False
        steps_per_s, parts, per_iteration = speed
        entry = {"at": time.time(), "steps_per_s": round(steps_per_s, 1), "steps_per_iteration": per_iteration}
        if policy == "single":
            entry["parts"] = {p: round(v, 6) for p, v in parts.items()}
            entry["threads"] = threads
        try:
            with self._locked():
                doc = self._read()
                doc.setdefault("spec", spec_name)
                label = f"{policy}:{workers}" + (f"@{devices}" if devices else "")
                runs = doc.setdefault("measured", {}).setdefault(label, [])
                runs.append(entry)
                del runs[:-KEEP]
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(doc, indent=1) + "\n")
                os.replace(tmp, self.path)
        except OSError:
            return False  # a read-only or full cache costs only the memory of this run
        return True

    def measured(self) -> dict[tuple[Any, ...], Measured]:
        """Each policy, worker count and placement measured within :data:`MAX_AGE_DAYS`, as its
        median, keyed by :func:`ran`."""
        cutoff = time.time() - MAX_AGE_DAYS * 86400
        out = {}
        for label, runs in (self._read().get("measured") or {}).items():
            where, _, devices = label.partition("@")
            policy, _, workers = where.rpartition(":")
            fresh = [r for r in runs if r.get("at", 0) >= cutoff and r.get("steps_per_s")]
            if not fresh or not workers.isdigit():
                continue
            parts = {p: statistics.median(r.get("parts", {}).get(p, 0.0) for r in fresh) for p in PARTS}
            out[ran(policy, int(workers), devices)] = Measured(
                statistics.median(r["steps_per_s"] for r in fresh),
                len(fresh),
                parts if policy == "single" else {},
                int(statistics.median(r.get("steps_per_iteration", 0) for r in fresh)),
                int(statistics.median(r.get("threads", 1) for r in fresh)),
            )
        return out
