"""Steps/s of each distributed policy across two hosts, with 0, 1 and 5 ms of added latency.

    .venv/bin/python benchmarks/host_latency.py [--delays 0,1,5] [--iterations 12]

Brings up two test hosts (network namespaces with sshd, ``scripts/testhosts.sh``, as root),
delays every packet each host sends by D (so a message between the hosts takes D more each
way, a round trip 2·D): with ``tc netem delay D``, or where the kernel has no ``sch_netem``
with ``benchmarks/netdelay.py`` (NFQUEUE; needs ``iptables`` and ``pip install fnfqueue``).
Then it trains PPO CartPole (the example, evaluation off)
under every distributed policy with rank 0 on one host and rank 1 on the other. Steps/s
leave out the first two iterations (tracing). ``single``, on this machine, is the
reference. The hosts are always torn down. Prints one table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rlgen.app.bench import PolicyResult, read_run, run_policy, speed_only

ROOT = Path(__file__).resolve().parent.parent

PREFIX, SUBNET = "rlgb", "192.168.215"  # not the tests' nor the user's default hosts
WARMUP = 2  # iterations left out of the rates (tracing)
POLICIES = ["actors-learner", "async-actors", "central-inference", "multi-learner"]


def script(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLGEN_TESTHOSTS_PREFIX": PREFIX, "RLGEN_TESTHOSTS_SUBNET": SUBNET}
    env["RLGEN_TESTHOSTS_STATE"] = str(state)
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "testhosts.sh"), *args], env=env, capture_output=True, text=True, check=True
    )


class Delay:
    """Added latency on both hosts' egress: netem if the kernel has it, else netdelay.py."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.rules: list[list[str]] = []

    def set(self, ms: float) -> str:
        self.clear()
        if ms <= 0:
            return "none"
        for i in (1, 2):
            ns, dev = f"{PREFIX}-h{i}", f"{PREFIX}0"
            netem = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{ms}ms"]
            if subprocess.run(netem, capture_output=True).returncode == 0:
                continue
            rule = ["-o", dev, "-j", "NFQUEUE", "--queue-num", str(i)]
            subprocess.run(["ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", *rule], check=True)
            self.rules.append(["ip", "netns", "exec", ns, "iptables", "-D", "OUTPUT", *rule])
            cmd = [sys.executable, str(ROOT / "benchmarks" / "netdelay.py"), "--queue", str(i), "--ms", str(ms)]
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=subprocess.PIPE, text=True)
            self.procs.append(proc)
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("netdelay.py did not start (needs iptables and `pip install fnfqueue`)")
        return "netdelay.py (NFQUEUE)" if self.procs else "tc netem"

    def clear(self) -> None:
        for rule in self.rules:
            subprocess.run(rule, capture_output=True)
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.rules, self.procs = [], []
        for i in (1, 2):
            cmd = ["ip", "netns", "exec", f"{PREFIX}-h{i}", "tc", "qdisc", "del", "dev", f"{PREFIX}0", "root"]
            subprocess.run(cmd, capture_output=True)


def cell(result: PolicyResult, run_dir: Path) -> str:
    """Steps/s after the first :data:`WARMUP` iterations, or why the run failed."""
    if not result.ok:
        return f"failed: {result.error[:60]}"
    return f"{read_run(run_dir, result.policy, result.workers, None, WARMUP).steps_per_s:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="0,1,5", help="added latency per direction, ms (default 0,1,5)")
    ap.add_argument("--iterations", type=int, default=12, help="iterations per run (default 12)")
    args = ap.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",")]
    with tempfile.TemporaryDirectory(prefix="rlgen-latency-") as tmp_name:
        tmp = Path(tmp_name)
        state = tmp / "hosts"
        spec = speed_only(ROOT / "examples" / "ppo-cartpole.rl.yaml", tmp)
        delay, how = Delay(), set()
        script(state, "up", "2")
        try:
            env = dict(re.findall(r"(RLGEN_TESTHOSTS_[A-Z0-9_]+)='?([^' \n]*)", script(state, "env").stdout))
            os.environ["PATH"] = f"{state}/bin{os.pathsep}{os.environ['PATH']}"  # the ssh that knows the hosts
            hosts = env["RLGEN_TESTHOSTS_HOSTS"]
            single = run_policy(spec, "single", 1, args.iterations, tmp / "single", None)
            ref = cell(single, tmp / "single")
            rows: dict[str, list[str]] = {}
            for ms in delays:
                how.add(delay.set(ms))
                for policy in POLICIES:
                    run_dir = tmp / f"{policy}-{ms:g}"
                    r = run_policy(spec, policy, 2, args.iterations, run_dir, None, extra=["--hosts", hosts])
                    rows.setdefault(policy, []).append(cell(r, run_dir))
                    print(f"{policy} at +{ms:g} ms: {rows[policy][-1]}", file=sys.stderr, flush=True)
        finally:
            delay.clear()
            script(state, "down")
    head = ["steps/s (2 hosts, 1 rank each)", *(f"+{ms:g} ms" for ms in delays)]
    body = [[p, *cells] for p, cells in rows.items()]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    for row in [head, *body]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    print(f"single (this machine, 1 process): {ref} steps/s; delay added with {', '.join(sorted(how - {'none'}))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
