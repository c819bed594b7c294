"""A plain Horovod job that shows where its ranks run: no rlgen imports.

    horovodrun --gloo -np 2 -H A:1,B:1 python tests/hosts/allreduce_probe.py [--seconds S]

Every rank allreduces its rank (sum), allgathers its rank, and allgathers a small
record of where it runs: hostname, network namespace (its name under /run/netns, where
`ip netns` keeps them; empty on a real host), the address of the interface Horovod's
Gloo uses (HOROVOD_GLOO_IFACE) and its pid. Rank 0 prints one line

    PROBE {"size": 2, "sum": 1, "ranks": [0, 1], "hosts": [{...}, {...}]}

With ``--seconds S`` every rank then keeps allreducing (every 0.1 s) for S seconds and
prints a heartbeat line each second: used to see how a run fails when a rank is killed
or a link goes down mid-run; ``--pause-rank RANK:S`` makes one rank sleep S seconds once in
that loop (a slow rank, which must not count as a dead one). Exit status 0 when every
check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def netns_name() -> str:
    """The `ip netns` name of this process's network namespace, or '' (not in a named one)."""
    try:
        mine = os.stat("/proc/self/ns/net")
        for name in sorted(os.listdir("/run/netns")):
            st = os.stat(os.path.join("/run/netns", name))
            if (st.st_ino, st.st_dev) == (mine.st_ino, mine.st_dev):
                return name
    except OSError:
        pass
    return ""


def iface_address(iface: str | None) -> str:
    import psutil  # a Horovod dependency

    for addr in psutil.net_if_addrs().get(iface or "", []):
        if addr.family == socket.AF_INET:
            return addr.address
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.0, help="keep allreducing this long after the checks")
    parser.add_argument(
        "--pause-rank",
        default="",
        metavar="RANK:S",
        help="in the loop, RANK sleeps S seconds once (a slow rank, not a dead one)",
    )
    args = parser.parse_args(argv)

    t0 = time.monotonic()
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    iface = os.environ.get("HOROVOD_GLOO_IFACE")
    me = {
        "rank": rank,
        "hostname": socket.gethostname(),
        "netns": netns_name(),
        "iface": iface,
        "address": iface_address(iface),
        "horovod_hostname": os.environ.get("HOROVOD_HOSTNAME", ""),
        "pid": os.getpid(),
    }
    total = int(hvd.allreduce(tf.constant(rank, tf.int64), op=hvd.Sum).numpy())
    ranks = [int(r) for r in hvd.allgather(tf.constant([rank], tf.int64)).numpy()]
    hosts = hvd.allgather_object(me)
    ok = total == size * (size - 1) // 2 and ranks == list(range(size)) and [h["rank"] for h in hosts] == ranks
    if rank == 0:
        doc = {"size": size, "sum": total, "ranks": ranks, "hosts": hosts, "ok": ok}
        doc["startup_s"] = round(time.monotonic() - t0, 2)
        print("PROBE " + json.dumps(doc), flush=True)

    if args.seconds > 0:
        # Each allreduce also sums "my time is up" flags, so every rank stops after the same
        # number of collectives (a rank that stopped alone would leave the others waiting).
        end = time.monotonic() + args.seconds
        n, last, stop = 0, 0.0, False
        pause_rank, pause_s = (
            (int(args.pause_rank.split(":")[0]), float(args.pause_rank.split(":")[1])) if args.pause_rank else (-1, 0)
        )
        while not stop:
            if rank == pause_rank and n == 3:
                print(f"PAUSE rank {rank}: sleeping {pause_s} s between collectives", flush=True)
                time.sleep(pause_s)
            flag = 1 if time.monotonic() >= end else 0
            s = hvd.allreduce(tf.constant([1, flag], tf.int64), op=hvd.Sum, name="heartbeat").numpy()
            n, stop = n + 1, bool(s[1] > 0)
            if time.monotonic() - last >= 1.0:
                last = time.monotonic()
                print(f"HEARTBEAT rank {rank} on {me['hostname']}: {n} allreduces, sum {int(s[0])}", flush=True)
            time.sleep(0.1)
        print(f"DONE rank {rank}: {n} allreduces", flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
