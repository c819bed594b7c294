"""What generated fragments call for one-way transfers over this rank's channels.

``rlgen.runtime.rank`` opens the rank's :class:`~rlgen.runtime.channels.Mesh` (when the
build's policy uses channels) and registers it here; generated boundary methods then
call these helpers, as they call :mod:`rlgen.runtime.comm` for Horovod collectives:

* :func:`send`: this rank's arrays to one or more peers (split along the batch axis when
  each peer gets its own envs' slice), tagged with an integer header (e.g. the version of
  the weights the rollout was collected with);
* :func:`gather`: one message from each of several peers, concatenated in rank order
  along each part's batch axis, as an allgather would give; also their headers;
* :func:`gather_any`: as many messages as there are peers, whichever come first, with
  stale ones dropped and credits returned (asynchronous actors);
* :func:`publish` / :func:`pull_version`: a learner's variables, versioned; an actor
  takes the version exactly its lag old (actors-learner), or with :func:`pull` the
  newest that arrived (asynchronous actors), waiting only when it is older than it may be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .channels import Mesh, pack, unpack

_MESH: Mesh | None = None
#: Credit frames of a flow-controlled transfer use its tag plus this offset.
CREDIT = 20_000
_credits: dict[tuple[int, int], int] = {}  # (peer, tag) -> messages this rank may still send
_loaders: dict[tuple[int, ...], tuple[Any, list]] = {}  # variables' ids -> (their assigner, array specs)


def attach(mesh: Mesh | None) -> None:
    """Use ``mesh`` for this process's transfers (``rlgen.runtime.rank`` does this)."""
    global _MESH
    _MESH = mesh


def mesh() -> Mesh:
    if _MESH is None:
        raise RuntimeError("this rank has no channels (run the build with `rlgen run`)")
    return _MESH


def send(
    peers: Sequence[int],
    tag: int,
    parts: Sequence[Any],
    dtypes: Sequence[str],
    axes: Sequence[int | None],
    splits: Sequence[int] | None = None,
    header: int = 0,
    credits: int | None = None,
) -> None:
    """Send ``parts`` to ``peers``, each as its ``dtypes`` entry (the receiver reads them so).
    With ``splits`` (env copies per peer), peer ``i`` gets envs ``splits[:i].sum() :
    splits[:i+1].sum()`` of each part along its axis: ``k`` rows an env for a part that folds
    ``k`` agents into each env's rows (parts without an axis go whole). With ``credits``, at
    most that many messages are on their way to a peer (sent but not yet taken by it, see
    :func:`gather_any`): a send waits only when all are."""
    arrays = [np.asarray(p, dtype=d) for p, d in zip(parts, dtypes, strict=True)]
    if credits is not None:
        for peer in peers:
            _spend_credit(peer, tag, credits)
    if splits is None or len(peers) == 1:
        payload = pack(arrays)
        for peer in peers:
            mesh().send(peer, tag, payload, header)
        return
    bounds = np.cumsum([0, *splits])
    rows = [
        None if axis is None else _rows_per_env(a, axis, int(bounds[-1]), tag)
        for a, axis in zip(arrays, axes, strict=True)
    ]
    for i, peer in enumerate(peers):
        sliced = [
            a if axis is None else np.take(a, range(k * bounds[i], k * bounds[i + 1]), axis=axis)
            for a, axis, k in zip(arrays, axes, rows, strict=True)
        ]
        mesh().send(peer, tag, pack(sliced), header)


def _rows_per_env(a: np.ndarray, axis: int, envs: int, tag: int) -> int:
    """How many rows of ``a`` along ``axis`` one env copy holds (its agents, when they are folded
    into the rows env-major; 1 otherwise)."""
    if a.shape[axis] % envs:
        raise ValueError(f"channel {tag}: {a.shape[axis]} rows along axis {axis} do not split over {envs} env copies")
    return a.shape[axis] // envs


def gather(
    peers: Sequence[int], tag: int, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], axes: Sequence[int | None]
) -> tuple[list[np.ndarray], list[int]]:
    """The next message ``tag`` from each of ``peers`` (each holding parts of ``shapes``),
    concatenated in rank order along each part's axis; and the messages' headers."""
    specs = list(zip(shapes, dtypes, strict=True))
    per_peer, headers = [], []
    for peer in peers:
        header, payload = mesh().recv(peer, tag)
        per_peer.append(unpack(payload, specs))
        headers.append(header)
    if len(per_peer) == 1:
        return [np.array(a) for a in per_peer[0]], headers
    out = [
        np.concatenate([p[i] for p in per_peer], axis=axis) if axis is not None else np.array(per_peer[0][i])
        for i, axis in enumerate(axes)
    ]
    return out, headers


def join_groups(parts: Sequence[Any]) -> Any:
    """The whole batch from its env groups' parts, in group order (pipelined inference): each
    part one array, or a tuple of arrays joined position by position."""
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(column) for column in zip(*parts, strict=True))
    return np.concatenate(parts)


def _spend_credit(peer: int, tag: int, limit: int) -> None:
    key = (peer, tag)
    available = _credits.setdefault(key, limit)
    while mesh().poll(peer, tag + CREDIT) is not None:  # credits returned meanwhile
        available += 1
    if available == 0:
        mesh().recv(peer, tag + CREDIT)  # wait until the peer takes one
        available = 1
    _credits[key] = available - 1


def gather_any(
    peers: Sequence[int],
    tag: int,
    shapes: Sequence[Sequence[int]],
    dtypes: Sequence[str],
    axes: Sequence[int | None],
    version: int,
    max_lag: int,
) -> tuple[list[np.ndarray], list[int], int]:
    """``len(peers)`` messages ``tag``, whichever arrive first from any of ``peers`` (one peer
    may contribute several), concatenated in arrival order along each part's axis. A message
    whose header (the weights version it was acted on with) is more than ``max_lag`` below
    ``version`` is dropped and another taken. Every message taken returns its sender a credit.
    Returns the parts, the headers used, and how many were dropped."""
    specs = list(zip(shapes, dtypes, strict=True))
    taken, headers, dropped = [], [], 0
    while len(taken) < len(peers):
        peer, header, payload = mesh().recv_any(peers, tag)
        mesh().send(peer, tag + CREDIT)
        if version - header > max_lag:
            dropped += 1
            continue
        taken.append(unpack(payload, specs))
        headers.append(header)
    out = [
        np.concatenate([t[i] for t in taken], axis=axis) if axis is not None else np.array(taken[0][i])
        for i, axis in enumerate(axes)
    ]
    return out, headers, dropped


def publish(peers: Sequence[int], tag: int, variables: Sequence[Any], version: int) -> None:
    """Send the variables' values to ``peers`` as version ``version``."""
    payload = pack([v.numpy() for v in variables])
    for peer in peers:
        mesh().send(peer, tag, payload, version)


def pull(peer: int, tag: int, variables: Sequence[Any], at_least: int, current: int = -1) -> int:
    """Load the newest published values into ``variables`` (which hold version ``current``),
    waiting only while the newest known version is below ``at_least``; returns the version
    held. Which version that is depends on timing (asynchronous actors)."""
    frame = mesh().latest(peer, tag)
    if frame is None and current >= at_least:
        return current
    if frame is None or frame[0] < at_least:
        frame = mesh().wait_latest(peer, tag, max(at_least, 0))
    return _load(variables, frame)


def pull_version(peer: int, tag: int, variables: Sequence[Any], at_least: int, current: int = -1) -> int:
    """Load the oldest published version of at least ``at_least`` into ``variables`` (which
    hold version ``current``; kept if that is new enough), waiting until it arrives; returns
    the version held. The publisher sends every version, so this is exactly ``at_least``
    (the first one published, at the start or on resuming): which weights an actor acts
    with never depends on timing, and a run repeats itself from its seed."""
    at_least = max(at_least, 0)  # the first pull always waits for the publisher's weights
    if current >= at_least:
        return current
    return _load(variables, mesh().wait_oldest(peer, tag, at_least))


def _load(variables: Sequence[Any], frame: tuple[int, bytes]) -> int:
    """Assign a frame's arrays to ``variables`` in one compiled call; returns its version."""
    key = tuple(id(v) for v in variables)
    if key not in _loaders:  # the first load of these variables builds their assigner
        from .tfutil import assigner

        _loaders[key] = (assigner(variables), [(tuple(v.shape), v.dtype.as_numpy_dtype) for v in variables])
    load, specs = _loaders[key]
    version, payload = frame
    load(unpack(payload, specs))
    return version
