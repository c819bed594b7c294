"""Point-to-point channels between ranks: one-way, non-blocking transfers.

Horovod offers collectives only: every rank of a set must call the same operation,
so each one is a meeting, and on this kind of machine a meeting costs 1.5–3.5 ms
(allgather, allreduce) against 0.06 ms for a message round trip on a socket. The
transfers that let ranks overlap — an actor's rollout going to the learner while the
actor keeps stepping, the learner's newest weights waiting for the actor to pick them
up, one env group's observations while another group steps — are one-way, so they
travel here, over TCP between the ranks that need them. Horovod still starts the
ranks, exchanges the channel addresses once, and runs the collectives (initial weights,
gradient allreduce).

A :class:`Mesh` holds one connection per peer. A sender never waits for the receiver
to be ready (what the socket cannot take at once, a sender thread writes later); the
receiver takes frames in order (:meth:`Mesh.recv`), takes whatever arrives first from
several peers (:meth:`Mesh.recv_any`), keeps only the newest (:meth:`Mesh.latest`, for
asynchronous actors' weights) or takes the oldest new enough one (:meth:`Mesh.wait_oldest`,
for weights exactly as old as a lag). A frame is a tag, a small integer header (e.g.
the weights' version) and the arrays' bytes (their shapes and dtypes are fixed by the
plan, so only bytes travel).

A peer whose connection closes without saying goodbye has failed: anything waiting on
it raises :class:`PeerLost` naming it.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

_FRAME = struct.Struct("!HqQ")  # tag, header (an int: a version, a count), payload length
_BYE = 0xFFFF  # tag of the goodbye frame
#: Seconds to wait for peers' connections at start-up.
CONNECT_TIMEOUT = 60.0
#: Seconds a closing rank waits for its peers to take what it sent and close their ends too,
#: reading what they still send meanwhile. A peer reads at its next receive, which may be a
#: whole update away (a Breakout learner's takes 3-15 s, and an actor's last rollout, 29 MB,
#: does not fit in the sockets' buffers); a socket closed before then would be reset by what
#: the peer still sends it (new weights), and the reset drops what the peer had not read
#: yet. A peer that is gone ends the wait at once.
CLOSE_TIMEOUT = 300.0


class PeerLost(ConnectionError):
    """A peer rank's connection closed without a goodbye (it died or its host is gone)."""

    def __init__(self, rank: int) -> None:
        super().__init__(f"rank {rank} closed its connection (it failed or was killed)")
        self.rank = rank


class Stopped(Exception):
    """Raised in a wait that a stop request interrupted (see :meth:`Mesh.interrupt`)."""


ArraySpec = tuple[Sequence[int], str]  # (shape, dtype name)


def pack(arrays: Sequence[np.ndarray]) -> bytes:
    """The arrays' bytes, one after the other (C order)."""
    return b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)


def unpack(payload: bytes | memoryview, specs: Sequence[ArraySpec]) -> list[np.ndarray]:
    """Arrays of the given shapes and dtypes from :func:`pack`'s bytes (views, no copy)."""
    out, offset = [], 0
    for shape, dtype in specs:
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if len(shape) else 1
        out.append(np.frombuffer(payload, dt, count, offset).reshape(shape))
        offset += count * dt.itemsize
    if offset != len(payload):
        raise ValueError(f"payload of {len(payload)} bytes does not hold {specs} ({offset} bytes)")
    return out


class _Peer:
    def __init__(self, rank: int, sock: socket.socket) -> None:
        self.rank, self.sock = rank, sock
        self.buffer = bytearray()
        self.closed = False  # the connection ended
        self.said_bye = False
        self.pending: deque[memoryview] = deque()  # bytes the sender thread still has to write
        self.lock = threading.Lock()  # guards pending and writes to sock


class Mesh:
    """This rank's channels to its peers (see the module docstring).

    ``addresses[r]`` is ``(host, port)`` of rank ``r``'s listening socket (exchanged by
    :func:`connect`); ``peers`` are the ranks this one talks to. The higher rank of a
    pair dials the lower one.

    Only the rank's main thread sends and receives. Receiving reads the sockets directly
    (no thread hand-off: a message round trip costs about what the sockets cost); sending
    writes directly when the socket has room, and otherwise leaves the rest to a sender
    thread, so a send never waits for a busy receiver. :meth:`interrupt` may be called from
    any thread.
    """

    def __init__(self, rank: int, listener: socket.socket, addresses: Sequence[tuple[str, int]], peers: Iterable[int]):
        self.rank = rank
        self._peers: dict[int, _Peer] = {}
        self._queues: dict[tuple[int, int], deque[tuple[int, bytes]]] = {}
        self._stop_requested = False
        #: A frame with this tag and a non-zero header is a stop verdict: it ends every wait.
        self.stop_tag: int | None = None
        peers = sorted(set(peers) - {rank})
        for r in (r for r in peers if r < rank):
            self._peers[r] = _Peer(r, self._dial(addresses[r], r))
        listener.settimeout(CONNECT_TIMEOUT)
        for _ in (r for r in peers if r > rank):
            sock, _ = listener.accept()
            (theirs,) = struct.unpack("!i", _read_exactly(sock, 4))
            self._peers[theirs] = _Peer(theirs, sock)
        listener.close()
        self._wake_r, self._wake_w = socket.socketpair()  # interrupt() wakes a waiting select
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        for peer in self._peers.values():
            peer.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer.sock.setblocking(False)
            self._selector.register(peer.sock, selectors.EVENT_READ, peer)
        self._send_ready = threading.Condition()
        self._sender = threading.Thread(target=self._send_loop, name="rlgen-channels-send", daemon=True)
        self._closing = False
        self._sender.start()

    def _dial(self, address: tuple[str, int], rank: int) -> socket.socket:
        end = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                sock = socket.create_connection(address, timeout=5.0)
                break
            except OSError:
                if time.monotonic() > end:
                    raise ConnectionError(f"cannot reach rank {rank} at {address[0]}:{address[1]}") from None
                time.sleep(0.05)
        sock.settimeout(None)
        sock.sendall(struct.pack("!i", self.rank))
        return sock

    # --- sending ------------------------------------------------------------------
    def send(self, peer: int, tag: int, payload: bytes = b"", header: int = 0) -> None:
        """Send a frame to ``peer`` without waiting for it to read (see the class docstring).
        A peer that has finished (said goodbye) is skipped; one that was lost raises PeerLost."""
        p = self._peer(peer)
        if p.closed:
            if p.said_bye:
                return  # the peer finished and needs nothing more
            raise PeerLost(peer)
        data = memoryview(_FRAME.pack(tag, header, len(payload)) + payload)
        with p.lock:
            if not p.pending:
                try:
                    data = data[p.sock.send(data) :]
                except BlockingIOError:
                    pass
                except OSError:
                    raise PeerLost(peer) from None
            if data:
                p.pending.append(data)
                with self._send_ready:
                    self._send_ready.notify()

    def _send_loop(self) -> None:
        while not self._closing:
            busy = [p for p in self._peers.values() if p.pending and not p.closed]
            if not busy:
                with self._send_ready:
                    self._send_ready.wait(0.5)
                continue
            for p in busy:
                with p.lock:
                    while p.pending:
                        try:
                            sent = p.sock.send(p.pending[0])
                        except BlockingIOError:
                            break
                        except OSError:
                            p.pending.clear()
                            break
                        p.pending[0] = p.pending[0][sent:]
                        if not p.pending[0]:
                            p.pending.popleft()
            if any(p.pending for p in busy):
                _wait_writable([p.sock for p in busy if p.pending])

    # --- receiving ----------------------------------------------------------------
    def recv(self, peer: int, tag: int, timeout: float | None = None) -> tuple[int, bytes]:
        """The next frame ``tag`` from ``peer``: ``(header, payload)``; waits for it."""
        return self._take([peer], tag, timeout)[1:]

    def recv_any(self, peers: Sequence[int], tag: int, timeout: float | None = None) -> tuple[int, int, bytes]:
        """The first frame ``tag`` available from any of ``peers``: ``(peer, header, payload)``."""
        return self._take(list(peers), tag, timeout)

    def latest(self, peer: int, tag: int) -> tuple[int, bytes] | None:
        """The newest frame ``tag`` from ``peer`` that arrived, dropping older ones; None if none."""
        self._pump(0.0)
        q = self._queues.get((peer, tag))
        if not q:
            self._raise_if_failed(peer)
            return None
        frame = q[-1]
        q.clear()
        return frame

    def wait_latest(self, peer: int, tag: int, at_least: int, timeout: float | None = None) -> tuple[int, bytes]:
        """The newest frame ``tag`` from ``peer``, waiting until its header is at least ``at_least``:
        how an asynchronous actor takes the newest weights, waiting only for the first ones."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self._pump(0.0)
            q = self._queues.get((peer, tag))
            if q and q[-1][0] >= at_least:
                frame = q[-1]
                q.clear()
                return frame
            self._wait(end, [peer], tag, f"frame {tag} from rank {peer} with header >= {at_least}")

    def wait_oldest(self, peer: int, tag: int, at_least: int, timeout: float | None = None) -> tuple[int, bytes]:
        """The oldest frame ``tag`` from ``peer`` whose header is at least ``at_least``, dropping
        older ones and keeping newer ones queued; waits until one arrives. A sender that sends
        every version in order makes the answer independent of timing: how an actor takes
        weights exactly as old as its lag."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            self._pump(0.0)
            q = self._queues.get((peer, tag))
            while q and q[0][0] < at_least:
                q.popleft()
            if q:
                return q.popleft()
            self._wait(end, [peer], tag, f"frame {tag} from rank {peer} with header >= {at_least}")

    def poll(self, peer: int, tag: int) -> tuple[int, bytes] | None:
        """The next frame ``tag`` from ``peer`` if one arrived (None otherwise, also once the peer
        has finished); never waits."""
        self._pump(0.0)
        q = self._queues.get((peer, tag))
        if q:
            return q.popleft()
        self._raise_if_failed(peer)
        return None

    def finished(self, peer: int) -> bool:
        """Has ``peer`` said goodbye (it finished; nothing more will come from it than what is queued)?"""
        self._pump(0.0)
        return self._peer(peer).said_bye

    def interrupt(self) -> None:
        """Make every wait raise :class:`Stopped` (a stop request; callable from any thread)."""
        self._stop_requested = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _take(self, peers: list[int], tag: int, timeout: float | None) -> tuple[int, int, bytes]:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            for peer in peers:
                q = self._queues.get((peer, tag))
                if q:
                    header, payload = q.popleft()
                    return peer, header, payload
            self._wait(end, peers, tag, f"frame {tag} from rank(s) {peers}")

    def _wait(self, end: float | None, peers: list[int], tag: int, what: str) -> None:
        """Read whatever arrives next (or raise: peer lost, stop requested, timeout)."""
        self._raise_if_lost(peers, tag)
        if self._stop_requested:
            raise Stopped
        remaining = None if end is None else end - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"no {what} in time")
        self._pump(remaining)

    def _pump(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` for input, then read every socket that has some."""
        for key, _ in self._selector.select(timeout):
            if key.data is None:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            else:
                self._read(key.data)

    def _raise_if_lost(self, peers: list[int], tag: int) -> None:
        for peer in peers:
            p = self._peer(peer)
            if p.closed and not self._queues.get((peer, tag)):
                if not p.said_bye:
                    raise PeerLost(peer)
                if len(peers) == 1:
                    raise Stopped  # the peer finished: nothing more will come

    def _raise_if_failed(self, peer: int) -> None:
        p = self._peer(peer)
        if p.closed and not p.said_bye:
            raise PeerLost(peer)

    def _peer(self, rank: int) -> _Peer:
        try:
            return self._peers[rank]
        except KeyError:
            raise ValueError(f"rank {self.rank} has no channel to rank {rank}") from None

    def _read(self, peer: _Peer) -> None:
        while True:
            try:
                chunk = peer.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._close(peer)
                break
            peer.buffer += chunk
        while len(peer.buffer) >= _FRAME.size:
            tag, header, length = _FRAME.unpack_from(peer.buffer)
            if len(peer.buffer) < _FRAME.size + length:
                break
            payload = bytes(peer.buffer[_FRAME.size : _FRAME.size + length])
            del peer.buffer[: _FRAME.size + length]
            if tag == _BYE:
                peer.said_bye = True
                continue
            if tag == self.stop_tag and header:
                self._stop_requested = True
            self._queues.setdefault((peer.rank, tag), deque()).append((header, payload))

    def _close(self, peer: _Peer) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(peer.sock)
        peer.sock.close()
        peer.closed = True

    def close(self) -> None:
        """Say goodbye to every peer and close (a peer waiting on this rank then stops, not fails)."""
        for peer in list(self._peers.values()):
            with contextlib.suppress(OSError, PeerLost, Stopped):
                self.send(peer.rank, _BYE)
        # flush what is pending, then wait for every peer to read our goodbye and close its
        # end (reading meanwhile: a peer closing too flushes to this rank, and one that is
        # gone shows as closed); see CLOSE_TIMEOUT
        end = time.monotonic() + CLOSE_TIMEOUT
        while time.monotonic() < end and any(p.pending and not p.closed for p in self._peers.values()):
            self._pump(0.005)
        for peer in list(self._peers.values()):
            with contextlib.suppress(OSError):
                peer.sock.shutdown(socket.SHUT_WR)
        while time.monotonic() < end and not all(p.closed for p in self._peers.values()):
            self._pump(0.05)
        self._closing = True
        with self._send_ready:
            self._send_ready.notify()
        for peer in list(self._peers.values()):
            if not peer.closed:
                self._close(peer)
        with contextlib.suppress(OSError, ValueError):
            self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed during the handshake")
        data += chunk
    return data


def _wait_writable(socks: list[socket.socket]) -> None:
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            with contextlib.suppress(ValueError, OSError):
                sel.register(sock, selectors.EVENT_WRITE)
        if sel.get_map():
            sel.select(0.5)


def listen(host: str = "0.0.0.0") -> socket.socket:
    """A listening socket on an ephemeral port (its address goes to the peers)."""
    return socket.create_server((host, 0), backlog=64)


def connect(rank: int, size: int, peers: Iterable[int], advertise: str, exchange) -> Mesh:
    """Open this rank's channels: listen, share ``advertise:port`` with every rank through
    ``exchange`` (a function gathering one fixed-size byte row per rank, e.g. a Horovod
    allgather), then connect to ``peers``."""
    listener = listen()
    port = listener.getsockname()[1]
    row = f"{advertise}:{port}".encode().ljust(128, b"\0")
    rows = exchange(np.frombuffer(row, np.uint8))
    addresses = []
    for r in range(size):
        host, _, p = bytes(rows[r]).rstrip(b"\0").decode().rpartition(":")
        addresses.append((host, int(p)))
    return Mesh(rank, listener, addresses, peers)
