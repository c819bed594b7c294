"""Delay every packet a network namespace sends, for kernels without ``sch_netem``.

    ip netns exec NS python benchmarks/netdelay.py --ms 5 --queue 1   (as root)

What ``tc qdisc add dev IF root netem delay 5ms`` does, in user space: an iptables rule
sends the packets leaving ``IF`` to NFQUEUE ``--queue``, and this process accepts each
one ``--ms`` after it arrived, in order. Needs ``iptables`` and the ``fnfqueue`` package
(``pip install fnfqueue``). ``benchmarks/host_latency.py`` starts and stops it.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import threading
import time

import fnfqueue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queue", type=int, required=True, help="NFQUEUE number the iptables rule uses")
    ap.add_argument("--ms", type=float, required=True, help="delay per packet, milliseconds")
    args = ap.parse_args()
    conn = fnfqueue.Connection()
    conn.bind(args.queue).set_mode(0, fnfqueue.COPY_META)  # verdicts only: no payload copied
    delay, held, order = args.ms / 1000.0, [], itertools.count()
    ready = threading.Condition()

    def release() -> None:
        while True:
            with ready:
                while not held or held[0][0] > time.monotonic():
                    ready.wait(held[0][0] - time.monotonic() if held else None)
                _, _, packet = heapq.heappop(held)
            packet.accept()

    threading.Thread(target=release, daemon=True).start()
    print("ready", flush=True)
    for packet in conn:
        with ready:
            heapq.heappush(held, (time.monotonic() + delay, next(order), packet))
            ready.notify()


if __name__ == "__main__":
    main()
