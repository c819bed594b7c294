"""What a byte costs through rlgen's channels: the cost model's ``BYTE_S`` (app/costmodel.py).

    .venv/bin/python benchmarks/channel_bytes.py [--rounds 20] [--steps 1024]

A second process (rank 1) packs a PPO Breakout rollout's observations (``--steps`` of
``[4, 84, 84]`` uint8, 28,224 bytes each; 28.9 MB for one iteration of the example) with
:func:`rlgen.runtime.channels.pack` and sends them to this one (rank 0) over a
:class:`~rlgen.runtime.channels.Mesh` on 127.0.0.1, which receives and unpacks them, then
answers with a one-byte frame; the same round with a one-byte payload gives the fixed cost.
Seconds per byte is (the large round trip less the small one) over the payload's bytes, the
median of ``--rounds`` rounds after 2 unmeasured ones. Both processes are timed together, as a
rollout costs the actor that sends it and the learner that receives it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from rlgen.runtime.channels import Mesh, listen, pack, unpack

OBS = (4, 84, 84)

_SENDER = """
import sys
import numpy as np
from rlgen.runtime.channels import Mesh, listen, pack
listener = listen("127.0.0.1")
print(listener.getsockname()[1], flush=True)
port0, rounds, steps = map(int, sys.stdin.readline().split())
mesh = Mesh(1, listener, [("127.0.0.1", port0), ("127.0.0.1", 0)], [0])
big = np.random.default_rng(0).integers(0, 256, (steps, 4, 84, 84), dtype=np.uint8)
for payload in ([big], [big[:0]]):
    for _ in range(rounds + 2):
        mesh.send(0, 1, pack(payload))
        mesh.recv(0, 2, timeout=120)
mesh.close()
"""


def round_trips(rounds: int, steps: int) -> tuple[list[float], list[float]]:
    """Seconds of each measured round: the large payload's, then the one-byte payload's."""
    listener = listen("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-c", _SENDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port1 = int(proc.stdout.readline())
        proc.stdin.write(f"{listener.getsockname()[1]} {rounds} {steps}\n")
        proc.stdin.flush()
        mesh = Mesh(0, listener, [("127.0.0.1", 0), ("127.0.0.1", port1)], [1])
        times: list[list[float]] = [[], []]
        for which, n in enumerate((steps, 0)):
            started = time.perf_counter()
            for i in range(rounds + 2):
                _, payload = mesh.recv(1, 1, timeout=120)
                unpack(payload, [((n, *OBS), "uint8")])
                mesh.send(1, 2, pack([np.zeros(1, np.uint8)]))
                now = time.perf_counter()
                if i >= 2:
                    times[which].append(now - started)
                started = now
        mesh.close()
        return times[0], times[1]
    finally:
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=1024)
    args = ap.parse_args()
    big, small = round_trips(args.rounds, args.steps)
    nbytes = args.steps * int(np.prod(OBS))
    per_byte = (statistics.median(big) - statistics.median(small)) / nbytes
    print(
        f"{nbytes:,} bytes: {1000 * statistics.median(big):.1f} ms a round (median of {len(big)}), one byte "
        f"{1000 * statistics.median(small):.2f} ms; {per_byte * 1e9:.2f} ns a byte ({1 / per_byte / 1e9:.2f} GB/s)"
    )


if __name__ == "__main__":
    main()
