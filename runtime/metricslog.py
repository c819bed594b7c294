"""``metrics.jsonl``: the run's rows, one per iteration, or one per few short iterations.

An off-policy loop at the RL Zoo's settings runs one env step per iteration (SAC, TD3:
``train_freq 1``). A row per iteration there is a row per env step: 500 bytes each, half a
gigabyte for the SAC HalfCheetah example's million steps, and a tenth of a millisecond of
encoding and writing in every env step. So iterations shorter than ``ROW_ENV_STEPS`` env
steps share a row: ``ROW_ENV_STEPS // steps_per_iteration`` of them (:func:`iterations_per_row`).

A row that covers several iterations (``iterations`` says how many; 1 otherwise) holds:

* the run's state at its last iteration: ``iteration``, ``env_steps``, ``time``,
  ``episodes``, ``mean_return``, ``mean_length``, ``policy_lag``, ``dropped``, evaluation fields;
* the time per part summed over its iterations (``time_*``, ``rest_time_*``), so that per-part
  figures per iteration are sums over rows divided by the iterations they cover
  (:func:`per_iteration`);
* ``steps_per_s`` over its iterations;
* the learner's metrics averaged over its iterations that learned (absent if none did).

A row ends early where something happens that a reader must see at its iteration: an
evaluation lands, a checkpoint is written (a resumed run drops the rows after its checkpoint,
so rows and checkpoints line up), the run stops or ends, or a rank fails (the iterations so
far are written, nothing is lost). Two iterations always have a row of their own, because
they trace and compile and readers leave them out of rates: the first of each launch, and the
first that learns.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple

ROW_ENV_STEPS = 64  # iterations shorter than this share a row

_SUMMED = ("time_", "rest_time_")


def iterations_per_row(steps_per_iteration: int) -> int:
    """How many iterations of ``steps_per_iteration`` env steps one row covers."""
    return max(1, ROW_ENV_STEPS // max(1, int(steps_per_iteration)))


def per_iteration(rows: Iterable[Mapping[str, Any]], key: str) -> float:
    """The mean of a summed field (``time_*``, ``rest_time_*``) per iteration over ``rows``."""
    total = count = 0.0
    for row in rows:
        total += float(row.get(key) or 0.0)
        count += int(row.get("iterations", 1))
    return total / count if count else 0.0


class MetricsLog:
    """Appends rows to ``path``; :meth:`add` takes one iteration's record at a time."""

    def __init__(self, path: Path, every: int, steps_per_iteration: int) -> None:
        self.every = max(1, int(every))
        self._steps = int(steps_per_iteration)
        self._file: IO[str] | None = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - held until close()
        self._pending: list[_Iteration] = []
        self._first = True  # the launch's first iteration is still to come
        self._learned = False  # an iteration of this launch has learned

    def add(
        self, record: Mapping[str, Any], seconds: float, learned: Mapping[str, float], end_row: bool
    ) -> dict[str, Any] | None:
        """One iteration's ``record``: it took ``seconds``, and ``learned`` are its learner
        metrics (also in ``record``; empty if it did not learn). Written now if its row is full
        or ``end_row``; returns the row that ends with it, if one does."""
        alone = self._first or (bool(learned) and not self._learned)
        self._first, self._learned = False, self._learned or bool(learned)
        if alone and self._pending:
            self._write()
        self._pending.append(_Iteration(dict(record), float(seconds), dict(learned)))
        if alone or end_row or len(self._pending) >= self.every:
            return self._write()
        return None

    def close(self) -> None:
        """Write the iterations not yet written, then close the file."""
        if self._file is None:
            return
        if self._pending:
            self._write()
        self._file.close()
        self._file = None

    def _write(self) -> dict[str, Any]:
        assert self._file is not None
        row = _row(self._pending, self._steps)
        self._pending = []
        self._file.write(json.dumps(finite(row)) + "\n")  # sanitised once per row, not per iteration
        self._file.flush()
        return row


def finite(value: Any) -> Any:
    """JSON without NaN/Infinity (they become null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


class _Iteration(NamedTuple):
    record: dict[str, Any]
    seconds: float
    learned: dict[str, float]


def _row(pending: list[_Iteration], steps_per_iteration: int) -> dict[str, Any]:
    """One row for the iterations in ``pending`` (see the module's docstring)."""
    last = pending[-1].record
    row = {**last, "iterations": len(pending)}
    if len(pending) == 1:
        return row
    seconds = sum(it.seconds for it in pending)
    row["steps_per_s"] = round(steps_per_iteration * len(pending) / seconds, 1) if seconds > 0 else None
    for key in {k for it in pending for k in it.record if k.startswith(_SUMMED)}:
        row[key] = round(sum(float(it.record.get(key) or 0.0) for it in pending), 5)
    for key in {k for it in pending for k in it.learned}:
        values = [v for it in pending if _finite_number(v := it.learned.get(key))]
        row[key] = sum(values) / len(values) if values else None  # None: a NaN (or null) loss in every iteration
    return row


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows a run logged (``metrics.jsonl``); a half-written last line (a running or
    killed run) is left out, and a run that logged nothing has none."""
    rows = []
    with contextlib.suppress(OSError):
        for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return rows


def drop_rows_after(metrics: Path, iteration: int, write: Callable[[Path, str], None]) -> None:
    """Keep the rows up to ``iteration`` (a resumed run redoes the later ones), rewritten with
    ``write(path, text)`` (atomic)."""
    if not metrics.is_file():
        return
    keep = []
    for line in metrics.read_text().splitlines():
        try:
            if json.loads(line).get("iteration", 0) <= iteration:
                keep.append(line)
        except ValueError:
            continue  # a half-written last line
    write(metrics, "".join(f"{line}\n" for line in keep))
