"""Point-to-point channels between ranks (runtime/channels.py): real TCP sockets, real processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rlgen.runtime.channels import Mesh, PeerLost, Stopped, listen, pack, unpack


def _meshes(size: int, peers_of) -> list[Mesh]:
    """``size`` meshes in this process, connected as ranks would be (each built in its own thread)."""
    listeners = [listen("127.0.0.1") for _ in range(size)]
    addresses = [("127.0.0.1", sock.getsockname()[1]) for sock in listeners]
    out: list[Mesh | None] = [None] * size

    def make(r: int) -> None:
        out[r] = Mesh(r, listeners[r], addresses, peers_of(r))

    threads = [threading.Thread(target=make, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(m is not None for m in out)
    return out  # type: ignore[return-value]


def _close(*meshes: Mesh) -> None:
    """Close meshes at once, as ranks finishing together do (each waits for its peers to close)."""
    threads = [threading.Thread(target=m.close) for m in meshes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)


def _star(size: int):
    return lambda r: range(1, size) if r == 0 else [0]


def test_pack_and_unpack_round_trip_shapes_and_dtypes():
    arrays = [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.array([1, 0, 1], np.bool_), np.int32(7)]
    specs = [((2, 3, 4), "float32"), ((3,), "bool"), ((), "int32")]
    back = unpack(pack(arrays), specs)
    for a, b in zip(arrays, back, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="does not hold"):
        unpack(pack(arrays), specs[:2])


def test_frames_arrive_in_order_per_tag_and_senders_do_not_wait():
    learner, actor = _meshes(2, _star(2))
    try:
        big = np.random.default_rng(0).normal(size=(1024, 105)).astype(np.float32)  # a MuJoCo-sized rollout
        start = time.perf_counter()
        for k in range(20):
            actor.send(0, 1, pack([big + k]), header=k)
        assert time.perf_counter() - start < 2.0  # the learner's main loop never read: the sends did not wait
        actor.send(0, 2, b"other tag")
        assert learner.recv(1, 2) == (0, b"other tag")
        for k in range(20):
            header, payload = learner.recv(1, 1)
            assert header == k
            np.testing.assert_array_equal(unpack(payload, [((1024, 105), "float32")])[0], big + k)
    finally:
        _close(actor, learner)


def test_latest_keeps_the_newest_and_wait_latest_waits_only_for_a_new_enough_version():
    learner, actor = _meshes(2, _star(2))
    try:
        assert actor.latest(0, 5) is None
        for version in range(1, 4):
            learner.send(1, 5, f"w{version}".encode(), header=version)
        assert actor.wait_latest(0, 5, at_least=2, timeout=5) == (3, b"w3")  # newest, older ones dropped
        assert actor.latest(0, 5) is None
        threading.Timer(0.3, lambda: learner.send(1, 5, b"w4", header=4)).start()
        start = time.perf_counter()
        assert actor.wait_latest(0, 5, at_least=4, timeout=5) == (4, b"w4")
        assert time.perf_counter() - start >= 0.25
        with pytest.raises(TimeoutError):
            actor.wait_latest(0, 5, at_least=9, timeout=0.2)
    finally:
        _close(actor, learner)


def test_wait_oldest_takes_exactly_the_version_asked_for_and_keeps_newer_ones():
    learner, actor = _meshes(2, _star(2))
    try:
        for version in range(1, 5):
            learner.send(1, 5, f"w{version}".encode(), header=version)
        assert actor.wait_oldest(0, 5, at_least=2, timeout=5) == (2, b"w2")  # not the newest (4)
        assert actor.wait_oldest(0, 5, at_least=4, timeout=5) == (4, b"w4")  # 3 dropped: never wanted
        threading.Timer(0.3, lambda: learner.send(1, 5, b"w7", header=7)).start()
        start = time.perf_counter()
        assert actor.wait_oldest(0, 5, at_least=5, timeout=5) == (7, b"w7")  # the first one new enough
        assert time.perf_counter() - start >= 0.25
        with pytest.raises(TimeoutError):
            actor.wait_oldest(0, 5, at_least=8, timeout=0.2)
    finally:
        _close(actor, learner)


def test_recv_any_takes_whichever_actor_is_first():
    learner, a1, a2 = _meshes(3, _star(3))
    try:
        a2.send(0, 1, b"from 2")
        assert learner.recv_any([1, 2], 1, timeout=5) == (2, 0, b"from 2")
        a1.send(0, 1, b"from 1")
        assert learner.recv_any([1, 2], 1, timeout=5) == (1, 0, b"from 1")
    finally:
        _close(a1, a2, learner)


def test_a_goodbye_ends_waits_quietly_and_an_interrupt_ends_them_too():
    learner, actor = _meshes(2, _star(2))
    threading.Timer(0.2, actor.interrupt).start()
    with pytest.raises(Stopped):
        actor.recv(0, 1, timeout=10)
    closing = threading.Thread(target=learner.close)  # as in its own process: it stays until the actor closes
    closing.start()
    with pytest.raises(Stopped):  # the learner said goodbye: nothing more will come
        actor.recv(0, 1, timeout=10)
    actor.close()
    closing.join(10)
    assert not closing.is_alive()


_PEER = """
import sys, time
from rlgen.runtime.channels import Mesh, listen
listener = listen("127.0.0.1")
print(listener.getsockname()[1], flush=True)
port0 = int(sys.stdin.readline())
mesh = Mesh(1, listener, [("127.0.0.1", port0), ("127.0.0.1", 0)], [0])
mesh.send(0, 1, b"hello")
time.sleep(60)
"""


def test_a_peer_process_that_dies_is_named():
    listener = listen("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-c", _PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port1 = int(proc.stdout.readline())
        proc.stdin.write(f"{listener.getsockname()[1]}\n")
        proc.stdin.flush()
        mesh = Mesh(0, listener, [("127.0.0.1", 0), ("127.0.0.1", port1)], [1])
        assert mesh.recv(1, 1, timeout=20) == (0, b"hello")
        proc.kill()
        with pytest.raises(PeerLost, match="rank 1 closed its connection"):
            mesh.recv(1, 1, timeout=20)
        mesh.close()
    finally:
        proc.kill()


def test_a_rank_that_closes_waits_for_a_busy_peer_to_take_a_rollout_too_big_for_the_sockets():
    """An actor's last PPO Breakout rollout (29 MB of uint8 frames) while the learner is still
    updating: closing flushes it, however long the learner takes to read (more than the 2 s
    the goodbye alone gets), and the learner gets it whole, then the goodbye."""
    learner, actor = _meshes(2, _star(2))
    frames = np.random.default_rng(0).integers(0, 256, (1024, 4, 84, 84), dtype=np.uint8)
    actor.send(0, 1, pack([frames]))
    closing = threading.Thread(target=actor.close)
    closing.start()
    time.sleep(3.0)  # the learner's update
    _, payload = learner.recv(1, 1, timeout=60)
    np.testing.assert_array_equal(unpack(payload, [((1024, 4, 84, 84), "uint8")])[0], frames)
    with pytest.raises(Stopped):  # then nothing more: it finished, it was not lost
        learner.recv(1, 1, timeout=30)
    closing.join(30)
    assert not closing.is_alive()
    learner.close()


def test_a_rank_that_closes_stays_until_its_busy_peer_has_read_it_though_the_peer_sends_more():
    """The actor's last rollout sits in the sockets' buffers while the learner updates past the
    goodbye's old 2 s; the learner then sends the actor new weights. Had the actor's socket
    closed, those would reset the connection and drop the unread rollout (PeerLost)."""
    learner, actor = _meshes(2, _star(2))
    frames = np.random.default_rng(0).integers(0, 256, (16, 4, 84, 84), dtype=np.uint8)  # fits the buffers
    actor.send(0, 1, pack([frames]))
    closing = threading.Thread(target=actor.close)
    closing.start()
    time.sleep(2.5)  # the learner's update
    learner.send(1, 2, pack([np.zeros(1 << 20, np.uint8)]))  # its new weights
    time.sleep(0.5)
    _, payload = learner.recv(1, 1, timeout=30)
    np.testing.assert_array_equal(unpack(payload, [((16, 4, 84, 84), "uint8")])[0], frames)
    with pytest.raises(Stopped):
        learner.recv(1, 1, timeout=30)
    closing.join(30)
    assert not closing.is_alive()
    learner.close()


def test_a_transfer_arrives_in_the_declared_dtypes_whatever_the_sender_holds():
    """MuJoCo envs give float64 observations; the receiver reads the plan's float32."""
    from rlgen.runtime import p2p

    learner, actor = _meshes(2, _star(2))
    try:
        obs = np.random.default_rng(1).normal(size=(3, 105))  # float64, as gymnasium's MuJoCo envs return
        action = np.array([1, 0, 2], np.int64)
        p2p.attach(actor)
        p2p.send([0], 1, [obs, action], ["float32", "int32"], [0, 0], header=4)
        p2p.attach(learner)
        (got_obs, got_action), headers = p2p.gather([1], 1, [[3, 105], [3]], ["float32", "int32"], [0, 0])
        assert headers == [4]
        assert got_obs.dtype == np.float32 and got_action.dtype == np.int32
        np.testing.assert_allclose(got_obs, obs, rtol=1e-6)
        np.testing.assert_array_equal(got_action, action)
    finally:
        p2p.attach(None)
        _close(learner, actor)
