"""A rank's failure in words: one line that says what happened (a full disk says so, and where),
told to the launcher and kept in ``ranks/<rank>.error`` with the traceback."""

from __future__ import annotations

import contextlib
import traceback
from typing import Any

from .metricslog import RowsNotWritten, disk_full
from .rundir import RunDir, write_atomic


def failure_reason(error: BaseException) -> str:
    """A failure in one line: what happened, without TensorFlow's execution-error boilerplate
    (a full disk says so, and where)."""
    text = str(error)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and "execution error" not in ln), "")
    if "Horovod has been shut down" in text:
        first = "stopped because another rank failed (Horovod shut down)"
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
        # a lost peer or a Horovod shutdown is another rank's failure seen from here
        from .channels import PeerLost

        secondary = "Horovod has been shut down" in str(error) or isinstance(error, PeerLost)
        lifeline.send("error", reason=reason, secondary=secondary)
    details = "".join(traceback.format_exception(error))
    with contextlib.suppress(OSError):  # e.g. a full or read-only disk: the reason went over the lifeline
        write_atomic(run_dir.rank_file(rank, "error"), reason + "\n\n" + details)
    return reason
