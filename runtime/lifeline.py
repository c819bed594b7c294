"""The lifeline: one TCP connection from every rank to the launcher (``rlgen run``).

Horovod starts the ranks, but it tells the launcher nothing while they run: not
which rank died first, not when to stop cleanly. The lifeline does:

* **ranks → launcher**: ``hello`` (rank, pid, host) when a rank starts, ``progress``
  records from rank 0 (the launcher draws the progress line, so rank output can go
  to a log file), ``error`` (a one-line reason) and ``done`` when it ends. A rank
  whose connection closes without ``error`` or ``done`` died from outside (a signal,
  out of memory): the launcher knows which one, at once, whatever the others report.
* **launcher → ranks**: ``interrupt`` (Ctrl-C) and ``terminate`` (SIGTERM): finish the
  iteration, write a final checkpoint, exit 0; and ``abort`` (another rank failed: exit now; the last
  checkpoint stays as it is).
* **launcher gone**: when the launcher dies (even by SIGKILL) the kernel closes its
  sockets; every rank sees end-of-file, stops cleanly if it can and exits within
  :data:`ORPHAN_GRACE` seconds in any case.
* **beats** (jobs that span hosts, ``RLGEN_LIFELINE_BEAT`` seconds): a host that goes
  down or off the network closes no connection, so both ends send a ``beat`` that often,
  and whichever hears nothing for :data:`LOST_BEATS` beats counts the other end as gone:
  the launcher names the silent rank and its host, the rank stops as if its launcher died.

Messages are JSON lines. The first line a rank sends carries a per-launch token,
so a stray connection cannot pose as a rank.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Seconds a rank whose launcher is gone may take to stop cleanly before it exits anyway.
ORPHAN_GRACE = 10.0
#: Seconds a rank waits to reach the launcher at start-up.
CONNECT_TIMEOUT = 20.0
#: Exit status of a rank that stops because its launcher is gone or asked it to abort.
EXIT_ABORTED = 70
#: Beats an end may miss before the other counts it as gone (when beats are on).
LOST_BEATS = 5


def _line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()


# --- rank side ----------------------------------------------------------------------
class Lifeline:
    """A rank's end: report to the launcher; hear ``interrupt``/``abort``; notice it is gone.

    ``on_interrupt`` is called (from a background thread) for Ctrl-C and when the
    launcher is gone; it should ask the training loop to stop at the end of the
    iteration. ``abort`` and an unfinished clean stop after the launcher is gone
    end the process with :data:`EXIT_ABORTED`.
    """

    def __init__(self, address: str, rank: int, on_interrupt: Callable[[str], None]) -> None:
        host, port, token = address.rsplit(":", 2)
        self.rank = rank
        self._on_interrupt = on_interrupt
        self._lock = threading.Lock()
        self._closed = False
        self.sock = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT)
        beat = float(os.environ.get("RLGEN_LIFELINE_BEAT", "0") or 0)
        self.sock.settimeout(beat * LOST_BEATS if beat > 0 else None)  # silence reads as a timeout: gone
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local_address = self.sock.getsockname()[0]  # this host's address as the launcher sees it
        self.send("hello", token=token, pid=os.getpid(), host=socket.gethostname())
        self._thread = threading.Thread(target=self._listen, name="rlgen-lifeline", daemon=True)
        self._thread.start()
        if beat > 0:
            threading.Thread(target=self._beat, args=(beat,), name="rlgen-lifeline-beat", daemon=True).start()

    def _beat(self, every: float) -> None:
        while not self._closed:
            self.send("beat")
            time.sleep(every)

    def send(self, kind: str, **payload: Any) -> None:
        if self._closed:
            return
        try:
            with self._lock:
                self.sock.sendall(_line({"kind": kind, "rank": self.rank, **payload}))
        except OSError:
            pass  # the launcher is gone; the listening thread handles that

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def _listen(self) -> None:
        reader = self.sock.makefile("rb")
        try:
            for raw in reader:
                msg = json.loads(raw)
                if msg.get("kind") == "interrupt":
                    self._on_interrupt("interrupted")
                elif msg.get("kind") == "terminate":
                    self._on_interrupt("terminated")
                elif msg.get("kind") == "abort":
                    os._exit(EXIT_ABORTED)
        except (OSError, ValueError):
            pass
        if self._closed:
            return
        # The launcher is gone: stop cleanly if the loop can, and exit in any case.
        self._on_interrupt("launcher gone")
        time.sleep(ORPHAN_GRACE)
        os._exit(EXIT_ABORTED)


def connect_from_env(rank: int, on_interrupt: Callable[[str], None]) -> Lifeline | None:
    """The lifeline named by ``RLGEN_LIFELINE`` (``host:port:token``), if the launcher set it."""
    address = os.environ.get("RLGEN_LIFELINE")
    if not address:
        return None
    return Lifeline(address, rank, on_interrupt)


# --- launcher side ------------------------------------------------------------------
@dataclass
class RankState:
    rank: int
    pid: int = 0
    host: str = ""
    connected: bool = False
    ended: str = ""  # "" (running), "done", "error" or "died"
    reason: str = ""


@dataclass
class Event:
    """Something a rank said or did: ``hello``, ``progress``, ``note``, ``error``, ``done`` or ``died``."""

    kind: str
    rank: int
    payload: dict[str, Any] = field(default_factory=dict)


class Switchboard:
    """The launcher's end: accepts the ranks' connections and turns their lines into events."""

    def __init__(self, bind_host: str = "127.0.0.1", beat: float = 0.0) -> None:
        self.token = os.urandom(12).hex()
        self.beat = beat
        self._next_beat = 0.0
        self._heard: dict[int, float] = {}  # rank -> when it last said anything (monotonic)
        self._server = socket.create_server((bind_host, 0))
        self._server.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        self._conns: dict[socket.socket, dict[str, Any]] = {}
        self.ranks: dict[int, RankState] = {}

    @property
    def address(self) -> str:
        """What ranks connect to: ``host:port:token`` (give it as ``RLGEN_LIFELINE``)."""
        host, port = self._server.getsockname()[:2]
        return f"{host}:{port}:{self.token}"

    def poll(self, timeout: float) -> list[Event]:
        """Events of the next ``timeout`` seconds (fewer if something happens sooner)."""
        events: list[Event] = []
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                self._accept()
            else:
                events += self._read(key.fileobj)  # type: ignore[arg-type]
        if self.beat > 0 and time.monotonic() >= self._next_beat:
            self._next_beat = time.monotonic() + self.beat
            self.tell("beat")
        return events

    def silent(self) -> list[int]:
        """Ranks still running that have missed :data:`LOST_BEATS` beats (none when beats are off)."""
        if self.beat <= 0:
            return []
        limit = time.monotonic() - self.beat * LOST_BEATS
        return [r for r, s in self.ranks.items() if not s.ended and self._heard.get(r, limit) < limit]

    def tell(self, kind: str, **payload: Any) -> None:
        """Send ``interrupt``, ``terminate``, ``abort`` or ``beat`` to every connected rank."""
        for conn, state in list(self._conns.items()):
            if state.get("rank") is None:
                continue
            with contextlib.suppress(OSError):
                conn.sendall(_line({"kind": kind, **payload}))

    def close(self) -> None:
        for conn in list(self._conns):
            self._drop(conn)
        self._selector.close()
        self._server.close()

    def _accept(self) -> None:
        try:
            conn, _ = self._server.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self._conns[conn] = {"buffer": b"", "rank": None}
        self._selector.register(conn, selectors.EVENT_READ, "rank")

    def _read(self, conn: socket.socket) -> list[Event]:
        state = self._conns[conn]
        try:
            data = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        events: list[Event] = []
        if not data:
            rank = state["rank"]
            self._drop(conn)
            if rank is not None and not self.ranks[rank].ended:
                self.ranks[rank].ended = "died"
                events.append(Event("died", rank))
            return events
        state["buffer"] += data
        *lines, state["buffer"] = state["buffer"].split(b"\n")
        for raw in lines:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            event = self._message(conn, state, msg)
            if event is not None:
                events.append(event)
        return events

    def _message(self, conn: socket.socket, state: dict[str, Any], msg: dict[str, Any]) -> Event | None:
        kind, rank = msg.pop("kind", ""), msg.pop("rank", None)
        if state["rank"] is None:
            if kind != "hello" or msg.get("token") != self.token or not isinstance(rank, int):
                self._drop(conn)  # not one of our ranks
                return None
            state["rank"] = rank
            self.ranks[rank] = RankState(rank, int(msg.get("pid", 0)), str(msg.get("host", "")), True)
            self._heard[rank] = time.monotonic()
            return Event("hello", rank, msg)
        rank = state["rank"]
        self._heard[rank] = time.monotonic()
        if kind == "beat":
            return None
        if kind in ("error", "done"):
            self.ranks[rank].ended = kind
            self.ranks[rank].reason = str(msg.get("reason", ""))
        return Event(kind, rank, msg)

    def _drop(self, conn: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        self._conns.pop(conn, None)
        conn.close()
