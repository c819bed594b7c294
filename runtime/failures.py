"""A rank's failure in words: one line that says what happened (a full disk says so, and where),
told to the launcher and kept in ``ranks/<rank>.error`` with the traceback."""

from __future__ import annotations

import contextlib
import traceback
from typing import Any

from .metricslog import RowsNotWritten, disk_full
from .rundir import RunDir, write_atomic

# what Gloo and Horovod say when the other end of a collective went away: another rank's failure
# seen from here, not a cause
_PEER_GONE = (
    "Horovod has been shut down",
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "gloo/transport",
)


def peer_gone(error: BaseException) -> bool:
    """Whether ``error`` is this rank noticing that another rank is gone."""
    from .channels import PeerLost

    text = str(error)
    return isinstance(error, PeerLost) or any(marker in text for marker in _PEER_GONE)


def failure_reason(error: BaseException) -> str:
    """A failure in one line: what happened, without TensorFlow's execution-error boilerplate
    (a full disk says so, and where)."""
    text = str(error)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and "execution error" not in ln), "")
    if "Horovod has been shut down" in text:
        first = "stopped because another rank failed (Horovod shut down)"
    elif peer_gone(error) and getattr(error, "rank", None) is None and not disk_full(error):
        first = "lost the connection to another rank (it stopped or was killed)"
    if isinstance(error, KeyboardInterrupt):
        return "aborted by a second Ctrl-C"
    if getattr(error, "plain", False):  # an error of rlgen's own that says it all
        return first
    if isinstance(error, RowsNotWritten):  # it says what and where
        return error.strerror
    if disk_full(error):
        where = f" (writing {error.filename})" if getattr(error, "filename", None) else ""
        return f"no space left on the device{where}"
    if "No space left on device" in text:  # TensorFlow's own writes (checkpoints, summaries)
        return f"no space left on the device: {first}"
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def report_failure(error: BaseException, rank: int, run_dir: RunDir, lifeline: Any = None) -> str:
    """Tell the launcher (``lifeline``) and write ``ranks/<rank>.error``: the reason, then the
    traceback. Returns the reason."""
    reason = failure_reason(error)
    if lifeline is not None:
        lifeline.send("error", reason=reason, secondary=peer_gone(error))
    details = "".join(traceback.format_exception(error))
    with contextlib.suppress(OSError):  # e.g. a full or read-only disk: the reason went over the lifeline
        write_atomic(run_dir.rank_file(rank, "error"), reason + "\n\n" + details)
    return reason
