"""The run's rows: ``metrics.jsonl``, one row per iteration or per few short ones, and the
same rows in TensorBoard (:class:`Rows`, rank 0's).

An off-policy loop at the RL Zoo's settings runs one env step per iteration (SAC, TD3:
``train_freq 1``). A row per iteration there is a row per env step: 500 bytes each, half a
gigabyte for the SAC HalfCheetah example's million steps, and a tenth of a millisecond of
encoding and writing in every env step. So a row covers at most ``ROW_ENV_STEPS`` env steps
of whole iterations, ``ROW_ENV_STEPS // steps_per_iteration`` of them (:func:`iterations_per_row`):
iterations of 32 env steps or fewer share rows, longer ones have one each.

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

A row is written whole or not at all: a write the disk cannot take (full, over quota) is
undone, so that the file always ends with a whole row, and :class:`RowsNotWritten` says where.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

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


class RowsNotWritten(OSError):
    """A row the disk did not take (the message says why and where; the file ends whole)."""


def disk_full(error: BaseException) -> bool:
    """The error is a full disk or an exhausted quota."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


class MetricsLog:
    """Appends rows to ``path``; :meth:`add` takes one iteration's record at a time."""

    def __init__(self, path: Path, every: int, steps_per_iteration: int) -> None:
        self.every = max(1, int(every))
        self._steps = int(steps_per_iteration)
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
        if self._fd is None:
            return
        try:
            if self._pending:
                self._write()
        finally:
            os.close(self._fd)
            self._fd = None

    def _write(self) -> dict[str, Any]:
        assert self._fd is not None
        row = _row(self._pending, self._steps)
        self._pending = []
        data = (json.dumps(finite(row)) + "\n").encode()  # sanitised once per row, not per iteration
        end = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:  # undo the part written: the file ends with a whole row
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, end)
            why = "no space left on the device" if disk_full(exc) else exc.strerror or str(exc)
            raise RowsNotWritten(exc.errno, f"{why}: cannot write {self.path}") from exc
        return row


class Rows:
    """Rank 0's rows: ``metrics.jsonl`` (:class:`MetricsLog`) and, with ``tensorboard``, every
    ``log_every``-th row (and the last) as TensorBoard scalars."""

    def __init__(
        self, metrics: Path, tensorboard: Path | None, every: int, steps_per_iteration: int, log_every: int
    ) -> None:
        self.log = MetricsLog(metrics, every, steps_per_iteration)
        self._log_every = max(1, int(log_every))
        self._since = 0  # rows since the last one TensorBoard got
        self._writer = None
        self._writers: dict[tuple[str, ...], Any] = {}  # compiled writers, per set of keys
        if tensorboard is not None:
            import tensorflow as tf

            self._writer = tf.summary.create_file_writer(str(tensorboard))

    def add(
        self, record: Mapping[str, Any], seconds: float, learned: Mapping[str, float], end_row: bool, last: bool
    ) -> None:
        """One iteration's record (see :meth:`MetricsLog.add`); ``last``: the run stops here."""
        row = self.log.add(record, seconds, learned, end_row)
        if row is None:
            return
        self._since += 1
        if self._writer is not None and (self._since >= self._log_every or last):
            self._since = 0
            self._scalars(row)

    def close(self) -> None:
        try:
            self.log.close()
        finally:
            if self._writer is not None:
                self._writer.close()

    def _scalars(self, row: Mapping[str, Any]) -> None:
        """One compiled call writes every scalar (one eager ``tf.summary.scalar`` per key cost
        about 30 ms per write, a tenth of a small PPO iteration's time when done every 10)."""
        import tensorflow as tf

        keys = tuple(
            k
            for k, v in row.items()
            if k not in ("iteration", "iterations", "env_steps") and isinstance(v, int | float) and math.isfinite(v)
        )
        if keys not in self._writers:

            def write(step: tf.Tensor, values: tf.Tensor) -> None:
                with self._writer.as_default(step=step):
                    for i, key in enumerate(keys):
                        tf.summary.scalar(key, values[i])

            self._writers[keys] = tf.function(write, autograph=False)
        values = tf.constant([float(row[k]) for k in keys], tf.float32)
        self._writers[keys](tf.constant(row["env_steps"], tf.int64), values)


def named_metrics(metrics: Any, names: tuple[str, ...]) -> dict[str, float]:
    """A learner's metrics (a mapping, or values in ``names``' order) as a row's fields; a slot
    named "" is not the algorithm's (A2C reuses PPO's update and has no clip statistics)."""
    import numpy as np

    if metrics is None:
        return {}
    if isinstance(metrics, Mapping):
        values = {k: float(v) for k, v in metrics.items()}
    else:
        flat = np.asarray(metrics, np.float64).ravel().tolist()
        values = dict(zip(names or tuple(f"metric_{i}" for i in range(len(flat))), flat, strict=False))
    return {k: v for k, v in values.items() if k}


def group_metrics(
    by_group: Mapping[str, Any], names: tuple[str, ...], returns: Mapping[str, Sequence[float]] | None = None
) -> dict[str, float]:
    """Each agent group's learner metrics as one row's fields, ``<group>/<metric>`` (a group
    whose learner did not run this iteration, ``None``, adds none), and ``<group>/return``: the
    mean over the episodes that ended in the iteration of the group's mean agent return."""
    out: dict[str, float] = {}
    for group, metrics in by_group.items():
        out.update({f"{group}/{k}": v for k, v in named_metrics(metrics, names).items()})
    for group, values in (returns or {}).items():
        if len(values):
            out[f"{group}/return"] = float(sum(values) / len(values))
    return out


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
