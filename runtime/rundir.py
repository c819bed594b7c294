"""The run directory: the one home of its file names, of ``run.json`` and of the lock that keeps
one ``rlgen run`` writing to it at a time.

``run.json`` has two writers during a run (the launcher, rank 0) and readers in every command,
so every update goes through :meth:`RunDir.update`: read, change, write whole to a temporary
file of its own, rename into place, all under an exclusive ``flock`` on ``.run.json.lock``, so
that no update is lost and no reader sees half a file. Every other file of the directory is
named here, once.

:meth:`RunDir.claim` is what keeps a second trainer out (a scheduler relaunching ``--resume``
while the run still trains): the process that trains holds an exclusive lock on ``.lock`` for
its life, and another that asks for it is told which process (pid, host, command) has it. The
kernel lets the lock go when the process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .metricslog import disk_full, finite


class RunDirBusy(Exception):
    """Another live process trains in this run directory (the message names it)."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file of this call's own in the
    same directory, then a rename (a full disk leaves the old file, and no temporary one)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class RunDir:
    """One run directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._claim: int | None = None

    # --- its files ------------------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def state(self) -> Path:
        """A copy of the newest checkpoint's run state, for people."""
        return self.path / "state.json"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def ranks(self) -> Path:
        """This launch's per-rank files (pid, end state, error) and logs."""
        return self.path / "ranks"

    @property
    def launch_log(self) -> Path:
        return self.ranks / "launch.log"

    @property
    def eval_log(self) -> Path:
        return self.ranks / "eval.log"

    @property
    def curves(self) -> Path:
        return self.path / "curves.png"

    @property
    def builds(self) -> Path:
        """The builds the run ran (``rlgen run SPEC`` without ``--build-dir``)."""
        return self.path / "build"

    def policy(self, best: bool = False) -> Path:
        """The exported policy: the last one, or the best evaluated one."""
        return self.path / ("policy-best" if best else "policy")

    def rank_file(self, rank: int, kind: str) -> Path:
        """``ranks/<rank>.<kind>``: ``pid``, ``done`` or ``error``."""
        return self.ranks / f"{rank}.{kind}"

    def is_run(self) -> bool:
        return self.run_json.is_file()

    def fresh(self) -> bool:
        """The directory holds nothing but what the command that claimed it put there (its lock,
        the build it runs): a new run may start in it."""
        mine = {".lock", ".run.json.lock", self.builds.name}
        return not self.path.is_dir() or all(p.name in mine for p in self.path.iterdir())

    # --- run.json -----------------------------------------------------------------------
    def read(self) -> dict[str, Any]:
        """``run.json`` as it is now ({} where there is none yet). Raises ValueError on a file
        that is not a JSON object."""
        try:
            text = self.run_json.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError(f"{self.run_json} is not a JSON object")
        return doc

    def intra_op_threads(self) -> int:
        """The intra-op threads rank 0 runs TensorFlow with (``run.json``'s ``threads``, which it
        writes as it starts; 1 before)."""
        return int((self.read().get("threads") or {}).get("intra_op", 1))

    def update(
        self,
        fields: Mapping[str, Any] | None = None,
        drop: tuple[str, ...] = (),
        defaults: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """Set ``fields`` (and ``more``) in ``run.json``, remove the keys in ``drop`` and set
        ``defaults`` where absent, as one step no other writer can interleave with; returns the
        document written."""
        with self._json_lock():
            try:
                doc = self.read()
            except ValueError:  # a torn or foreign file: what is written now replaces it
                doc = {}
            doc.update(fields or {})
            doc.update(more)
            for key in drop:
                doc.pop(key, None)
            for key, value in (defaults or {}).items():
                doc.setdefault(key, value)
            text = json.dumps(finite(doc), indent=2, default=str) + "\n"
            try:
                write_atomic(self.run_json, text)
            except OSError as exc:
                if not disk_full(exc):
                    raise
                self._rewrite_in_place(text)
            return doc

    def _rewrite_in_place(self, text: str) -> None:
        """On a full disk there is no room for a second copy, but ``run.json``'s own blocks are
        there: overwrite them (the file's last block has room for what a status update adds).
        Not atomic: only for this case, so that a failed run is marked failed."""
        data = text.encode()
        fd = os.open(self.run_json, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _json_lock(self) -> Iterator[None]:
        fd = os.open(self.path / ".run.json.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # --- one trainer at a time ------------------------------------------------------
    def claim(self, command: str = "rlgen run") -> None:
        """Hold this directory for this process until it ends (or :meth:`release`); raise
        :class:`RunDirBusy`, naming the holder, when a live process holds it."""
        if self._claim is not None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunDirBusy(
                f"run directory {self.path} is in use by {holder}; wait for that run to end or stop it "
                "(Ctrl-C, or kill its pid), then resume"
            ) from None
        me = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        self._claim = fd

    def release(self) -> None:
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None


def _holder(fd: int) -> str:
    """Who holds a run directory's lock, as its lock file says."""
    try:
        me = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(me["since"])))
        return f"{me['command']} (pid {me['pid']} on {me['host']}, since {since})"
    except (ValueError, KeyError, TypeError, OSError):
        return "another process"


def default_run_dir(name: str, root: str | os.PathLike[str] = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>`` (a suffix is added if it exists)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(root) / f"{name}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = Path(root) / f"{name}-{stamp}-{n}"
    return path
