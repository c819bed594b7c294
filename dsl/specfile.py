"""Reading a spec's text: from a regular file, a pipe (a named FIFO, ``<(command)``) or standard
input (``-``), never more than :data:`rlgen.dsl.yamlload.MAX_BYTES` (+1) bytes, and never
waiting forever (a FIFO with no writer reads as empty; a live writer that stays silent for
:data:`PIPE_WAIT_S` is given up on). Devices and directories are refused."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from rlgen.dsl.yamlload import MAX_BYTES, SourceMap, fail, load_yaml, too_large


class SpecFileError(OSError):
    """A spec path that cannot be read as a spec (a device, a directory, a silent pipe): exit 2."""


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((what for test, what in kinds.items() if test(mode)), "not a regular file")


#: Seconds a pipe may stay silent, its writer alive, before reading it gives up (a named FIFO
#: or ``<(command)``; standard input waits as long as it takes).
PIPE_WAIT_S = 60.0
#: The name standard input is read under (``-`` on the command line).
STDIN = "<stdin>"


def read_spec(path: str | Path) -> str:
    """The text of a spec: a regular file, a pipe (a named FIFO, ``<(command)``) or standard
    input (``-``), never more than :data:`MAX_BYTES` (+1) bytes read. A device or a directory
    raises :class:`SpecFileError` (an :class:`OSError`), as do other I/O problems and a pipe
    silent for :data:`PIPE_WAIT_S`; a text too large or not UTF-8 raises :class:`YamlError`."""
    file = str(path)
    if file in ("-", STDIN):
        return _decoded(_read_capped(0, None), STDIN)
    mode = os.stat(path).st_mode  # follows symlinks; opens nothing
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise SpecFileError(errno.EINVAL, f"{_kind(mode)}, not a regular file or a pipe")
    # non-blocking: opening a FIFO that has no writer must not wait for one (it reads as empty)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode  # the file opened is still a regular one, or a pipe
        if stat.S_ISREG(mode):
            return _decoded(_read_capped(fd, None), file)
        if not stat.S_ISFIFO(mode):
            raise SpecFileError(errno.EINVAL, f"{_kind(mode)}, not a regular file or a pipe")
        return _decoded(_read_capped(fd, PIPE_WAIT_S), file)
    finally:
        os.close(fd)


def _read_capped(fd: int, wait: float | None) -> bytes:
    """Up to :data:`MAX_BYTES` + 1 bytes of ``fd`` (a pipe is waited for, ``wait`` seconds at most
    while it is silent; None: as long as it takes)."""
    import select

    chunks, size = [], 0
    while size <= MAX_BYTES:
        try:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
        except BlockingIOError:  # a pipe whose writer has not written yet
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise SpecFileError(errno.ETIMEDOUT, f"nothing came through the pipe for {wait:g} s") from None
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _decoded(raw: bytes, file: str) -> str:
    if len(raw) > MAX_BYTES:
        raise too_large(file)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = fail("E101", f"file is not UTF-8 text (byte {exc.start})", file, 1, 1, "save the spec as UTF-8")
        error.text = raw.decode("utf-8", "replace")
        raise error from None


def load_file(path: str | Path) -> tuple[Any, SourceMap]:
    """Read (see :func:`read_spec`) and load a spec file."""
    return load_yaml(read_spec(path), str(path))
