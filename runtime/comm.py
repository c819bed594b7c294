"""Horovod collectives at the cuts of a fragmented dataflow graph.

Generated fragments call these helpers at their boundaries; every rank of the
process set calls the same helper in the same order (the plan guarantees it).
Horovod is imported inside the functions, so importing this module (and
building code that uses it) never loads Horovod.

* :func:`gather`: some ranks contribute arrays, the others an empty slice; every
  rank gets the concatenation along ``axis`` in rank order (``allgather``).
* :func:`scatter`: rank ``root`` splits an array along axis 0 by ``splits``
  (one count per rank); every rank gets its slice (``alltoall``).
* :func:`broadcast_variables`: ``root``'s values of ``tf.Variable``s to all ranks.
* :func:`allreduce_gradients`: the mean of a list of gradients over all ranks, in-graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _hvd() -> Any:
    import horovod.tensorflow as hvd

    return hvd


def init() -> tuple[int, int]:
    """Start Horovod; returns ``(rank, size)``."""
    hvd = _hvd()
    hvd.init()
    return hvd.rank(), hvd.size()


def shutdown() -> None:
    """Stop Horovod in this rank: its background thread polls every HOROVOD_CYCLE_TIME and
    takes CPU from the rank's work, so ranks whose loop uses no collective stop it once the
    channels are up."""
    _hvd().shutdown()


def _to_wire(x: np.ndarray) -> np.ndarray:
    return x.astype(np.uint8) if x.dtype == np.bool_ else x


def gather(
    x: np.ndarray | None,
    shape: Sequence[int],
    dtype: str,
    axis: int = 0,
    name: str = "gather",
) -> np.ndarray:
    """Concatenate every rank's ``x`` along ``axis`` (``None``: contribute nothing).

    ``shape`` is one contribution's shape (used to build the empty slice of a
    rank that only receives); ``dtype`` is the numpy dtype name.
    """
    import tensorflow as tf

    hvd = _hvd()
    if x is None:
        empty = list(shape)
        empty[axis] = 0
        x = np.zeros(empty, dtype)
    x = _to_wire(np.asarray(x, dtype))
    moved = np.moveaxis(x, axis, 0)
    out = hvd.allgather(tf.convert_to_tensor(np.ascontiguousarray(moved)), name=name).numpy()
    return np.moveaxis(out, 0, axis).astype(dtype)


def scatter(
    x: np.ndarray | None,
    splits: Sequence[int],
    shape: Sequence[int],
    dtype: str,
    name: str = "scatter",
) -> np.ndarray:
    """Rank holding ``x`` sends ``splits[r]`` rows to rank ``r``; the others pass ``None``."""
    import tensorflow as tf

    hvd = _hvd()
    if x is None:
        x = np.zeros([0, *list(shape)[1:]], dtype)
        splits = [0] * len(splits)
    x = _to_wire(np.asarray(x, dtype))
    out = hvd.alltoall(tf.convert_to_tensor(x), splits=tf.constant(list(splits), tf.int32), name=name)
    received = out[0] if isinstance(out, tuple) else out
    return received.numpy().astype(dtype)


def broadcast_variables(variables: Sequence[Any], root_rank: int = 0) -> None:
    """Overwrite every rank's variables with ``root_rank``'s values."""
    _hvd().broadcast_variables(list(variables), root_rank=root_rank)


def allreduce_sum(x: np.ndarray, name: str = "sum") -> np.ndarray:
    """Sum a NumPy array over all ranks (eagerly, every rank at the same point), in float64."""
    import tensorflow as tf

    hvd = _hvd()
    return hvd.allreduce(tf.constant(np.asarray(x, np.float64)), op=hvd.Sum, name=name).numpy()


def allreduce_gradients(grads: list[Any]) -> list[Any]:
    """Average gradients over all ranks (inside a ``tf.function``) with ONE allreduce.

    The gradients are flattened into one vector, averaged, and split back: one
    collective per gradient step instead of one per variable (each costs a few
    milliseconds of latency between processes on a CPU machine).
    """
    import tensorflow as tf

    hvd = _hvd()
    shapes = [tf.shape(g) for g in grads]
    sizes = [tf.size(g) for g in grads]
    flat = tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)
    from .devices import host_scope

    # in host memory where the fragment is on a GPU: rlgen's Horovod is built with Gloo (its
    # allreduce has only a CPU kernel), and NCCL refuses several ranks on one GPU
    with host_scope():
        mean = hvd.allreduce(flat, op=hvd.Average, name="gradients")
    return [tf.reshape(part, shape) for part, shape in zip(tf.split(mean, sizes), shapes, strict=True)]


def gather_packed(
    xs: Sequence[np.ndarray] | None,
    shapes: Sequence[Sequence[int]],
    dtypes: Sequence[str],
    axes: Sequence[int],
    name: str = "gather_packed",
) -> list[np.ndarray]:
    """Several arrays in ONE allgather: each rank packs its contributions into bytes.

    Senders pass their arrays (one per part: ``shapes[i]``/``dtypes[i]`` describe one
    sender's part ``i``), pure receivers pass ``None``. Every rank gets, per part, the
    concatenation over senders along ``axes[i]``, in rank order, as :func:`gather` would
    give for that part alone. One collective instead of one per part: latency, not
    bandwidth, is what a collective costs on a CPU machine.
    """
    import tensorflow as tf

    hvd = _hvd()
    if xs is None:
        payload = np.zeros(0, np.uint8)
    else:
        payload = np.concatenate(
            [np.ascontiguousarray(np.asarray(x, d)).reshape(-1).view(np.uint8) for x, d in zip(xs, dtypes, strict=True)]
        )
    received = hvd.allgather(tf.convert_to_tensor(payload), name=name).numpy()
    sizes = [int(np.prod(s)) * np.dtype(d).itemsize for s, d in zip(shapes, dtypes, strict=True)]
    senders = len(received) // sum(sizes)
    rows = received.reshape(senders, sum(sizes))
    out, offset = [], 0
    for shape, dtype, axis, size in zip(shapes, dtypes, axes, sizes, strict=True):
        pieces = [rows[r, offset : offset + size].view(dtype).reshape(shape) for r in range(senders)]
        out.append(np.concatenate(pieces, axis=axis))
        offset += size
    return out
