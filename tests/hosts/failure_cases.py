"""How a plain two-host Horovod job fails: timings and messages for docs/notes/cluster-notes.md.

Run as root on a machine where ``scripts/testhosts.sh up`` works (it is run here, once per
case, so every case starts from fresh hosts; ``down`` at the end):

    python tests/hosts/failure_cases.py [--out DIR] [--only a1,d] [--cap 180]

Each case runs ``horovodrun --gloo`` with ``tests/hosts/allreduce_probe.py`` across the test
hosts and records how long horovodrun took to exit (from its start, and from the moment of
the fault for faults injected mid-run), its exit status, and its whole output (in DIR).
Not a test: it takes a few minutes and uses the machine's namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "testhosts.sh"
PROBE = ROOT / "tests" / "hosts" / "allreduce_probe.py"
PY = sys.executable
HOROVODRUN = str(Path(sys.executable).with_name("horovodrun"))


def sh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def hosts_env() -> dict[str, str]:
    out = sh("bash", "-c", f'eval "$({SCRIPT} env)" && env -0').stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


@dataclass
class Result:
    case: str
    what: str
    rc: int | None = None
    total_s: float = 0.0
    after_fault_s: float | None = None
    key_lines: list[str] = field(default_factory=list)
    leftovers: str = ""


def key_lines(text: str) -> list[str]:
    keep = re.compile(
        r"error|Error|not successful|Exit code|exit with status|Terminating|Timed out|refused|"
        r"No route|unreachable|timed out|Unable|No such file|ModuleNotFound|enforce|Connection|"
        r"Broken pipe|closed by|Killed|Not enough|slots|shut down|abort|HorovodInternalError",
        re.IGNORECASE,
    )
    lines = [ln.strip() for ln in text.splitlines() if keep.search(ln) and "cpu_feature_guard" not in ln]
    seen: list[str] = []
    for ln in lines:
        if ln not in seen:
            seen.append(ln)
    return seen[:14]


def run_case(
    name: str,
    what: str,
    env: dict[str, str],
    hosts: str,
    np_: int = 2,
    python: str = PY,
    probe_args: tuple[str, ...] = (),
    nic: bool = True,
    cache: bool = False,
    fault=None,
    cap: float = 180,
    out: Path | None = None,
) -> Result:
    cmd = [HOROVODRUN, "--gloo", *([] if cache else ["--disable-cache"]), "-np", str(np_), "-H", hosts]
    if nic:
        cmd += ["--network-interface", env["RLGEN_TESTHOSTS_IFACE"]]
    cmd += [python, str(PROBE), *probe_args]
    log_path = (out or Path("/tmp")) / f"{name}.log"
    res = Result(name, what)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
        fault_at = None
        try:
            if fault is not None:
                fault_at = fault(log_path, proc)
            proc.wait(timeout=max(1.0, cap - (time.monotonic() - t0)))
            res.rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            res.rc = None
    res.total_s = round(time.monotonic() - t0, 1)
    if fault_at is not None:
        res.after_fault_s = round(time.monotonic() - fault_at, 1)
    text = log_path.read_text(errors="replace")
    res.key_lines = key_lines(text)
    return res


def wait_for(log_path: Path, pattern: str, timeout: float = 90) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = log_path.read_text(errors="replace")
        m = re.search(pattern, text)
        if m:
            return m.group(0)
        time.sleep(0.2)
    raise RuntimeError(f"{pattern!r} did not appear in {log_path} within {timeout} s")


def rank_pid(log_path: Path, rank: int) -> int:
    line = wait_for(log_path, r"PROBE (\{.*\})")
    doc = json.loads(line.split("PROBE ", 1)[1])
    return next(h["pid"] for h in doc["hosts"] if h["rank"] == rank)


def ns_python_procs(ns: str) -> str:
    pids = sh("ip", "netns", "pids", ns).stdout.split()
    found = []
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "allreduce_probe" in args or "task_fn" in args:
            found.append(pid)
    return " ".join(found)


def leftovers(wait: float = 20) -> str:
    """Probe processes still in the namespaces when horovodrun has exited, and ``wait`` s later."""
    first = f"h1 [{ns_python_procs('rlgen-h1')}] h2 [{ns_python_procs('rlgen-h2')}]"
    time.sleep(wait)
    later = f"h1 [{ns_python_procs('rlgen-h1')}] h2 [{ns_python_procs('rlgen-h2')}]"
    return f"at exit: {first}; {wait:.0f} s later: {later}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/rlgen-failure-cases"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--cap", type=float, default=180, help="kill horovodrun after this many seconds")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    results: list[Result] = []

    def up() -> dict[str, str]:
        r = sh(str(SCRIPT), "up", "2", timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"testhosts up failed: {r.stderr}")
        return hosts_env()

    def case(name: str) -> bool:
        return not only or name in only

    try:
        if case("ok"):
            env = up()
            results.append(
                run_case("ok", "both hosts fine", env, env["RLGEN_TESTHOSTS_HOSTS"], cap=args.cap, out=args.out)
            )
        if case("ok-autonic"):
            env = up()
            results.append(
                run_case(
                    "ok-autonic",
                    "both fine, no --network-interface (horovodrun probes the interfaces)",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    nic=False,
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("a1"):
            env = up()
            sh(str(SCRIPT), "link", "rlgen-h2", "down")
            results.append(
                run_case(
                    "a1",
                    "host 2's link down before start",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("a1-cached"):
            # horovodrun caches a successful ssh check (and the interface probe) for 60 minutes
            # in ~/.horovod/cache.bin, keyed by -np, -H, --ssh-port and --ssh-identity-file
            env = up()
            hosts = env["RLGEN_TESTHOSTS_HOSTS"]
            run_case("a1-prime", "prime the cache", env, hosts, cache=True, cap=args.cap, out=args.out)
            sh(str(SCRIPT), "link", "rlgen-h2", "down")
            results.append(
                run_case(
                    "a1-cached",
                    "host 2's link down before start, without --disable-cache after a good run",
                    env,
                    hosts,
                    cache=True,
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("a2"):
            env = up()
            pid = int((Path(env["RLGEN_TESTHOSTS_STATE"]) / "rlgen-h2" / "sshd.pid").read_text())
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.5)
            results.append(
                run_case(
                    "a2",
                    "no sshd on host 2 (connection refused)",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("a3"):
            env = up()
            hosts = env["RLGEN_TESTHOSTS_ADDR1"] + ":1," + env["RLGEN_TESTHOSTS_ADDR1"].rsplit(".", 1)[0] + ".49:1"
            results.append(run_case("a3", "no machine at host 2's address", env, hosts, cap=args.cap, out=args.out))
        if case("b1"):
            env = up()
            results.append(
                run_case(
                    "b1",
                    "ranks run /usr/bin/python3 (no horovod) on both hosts",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    python="/usr/bin/python3",
                    cap=args.cap,
                    out=args.out,
                )
            )
        venv = str(Path(sys.executable).parent.parent)
        if case("b2"):
            env = up()
            sh(str(SCRIPT), "hide", "rlgen-h2", venv)
            results.append(
                run_case(
                    "b2",
                    f"host 2 lacks the venv ({venv} hidden there)",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("b3"):
            env = up()
            sh(str(SCRIPT), "hide", "rlgen-h2", venv)
            results.append(
                run_case(
                    "b3",
                    "host 2 lacks the venv, no --network-interface",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    nic=False,
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("c"):
            env = up()
            results.append(
                run_case("c", "-np 3 on A:1,B:1", env, env["RLGEN_TESTHOSTS_HOSTS"], np_=3, cap=args.cap, out=args.out)
            )
        if case("d"):
            env = up()

            def kill_rank1(log_path: Path, proc: subprocess.Popen) -> float:
                pid = rank_pid(log_path, 1)
                wait_for(log_path, r"HEARTBEAT rank 1 .*: [2-9]\d* allreduces")
                os.kill(pid, signal.SIGKILL)
                return time.monotonic()

            r = run_case(
                "d",
                "SIGKILL to rank 1 (host 2) mid-run",
                env,
                env["RLGEN_TESTHOSTS_HOSTS"],
                probe_args=("--seconds", "120"),
                fault=kill_rank1,
                cap=args.cap,
                out=args.out,
            )
            r.leftovers = leftovers()
            results.append(r)
        if case("e"):
            env = up()

            def link_down(log_path: Path, proc: subprocess.Popen) -> float:
                rank_pid(log_path, 1)
                wait_for(log_path, r"HEARTBEAT rank 1 .*: [2-9]\d* allreduces")
                sh(str(SCRIPT), "link", "rlgen-h2", "down")
                return time.monotonic()

            r = run_case(
                "e",
                "host 2's link down mid-run",
                env,
                env["RLGEN_TESTHOSTS_HOSTS"],
                probe_args=("--seconds", "300"),
                fault=link_down,
                cap=args.cap,
                out=args.out,
            )
            r.leftovers = leftovers()
            results.append(r)
        if case("e2"):
            env = up()
            cfg = Path(env["RLGEN_TESTHOSTS_SSH_CONFIG"])
            cfg.write_text(cfg.read_text().replace("ServerAliveInterval 5", "ServerAliveInterval 0"))

            def link_down2(log_path: Path, proc: subprocess.Popen) -> float:
                rank_pid(log_path, 1)
                wait_for(log_path, r"HEARTBEAT rank 1 .*: [2-9]\d* allreduces")
                sh(str(SCRIPT), "link", "rlgen-h2", "down")
                return time.monotonic()

            r = run_case(
                "e2",
                "host 2's link down mid-run, ssh without keep-alives (ssh's default)",
                env,
                env["RLGEN_TESTHOSTS_HOSTS"],
                probe_args=("--seconds", "300"),
                fault=link_down2,
                cap=args.cap,
                out=args.out,
            )
            r.leftovers = leftovers()
            results.append(r)
        if case("f"):
            env = up()
            hosts_file = Path(env["RLGEN_TESTHOSTS_STATE"]) / "rlgen-h2" / "hosts"
            text = hosts_file.read_text().replace(env["RLGEN_TESTHOSTS_ADDR2"] + " rlgen-h2", "127.0.0.1 rlgen-h2")
            with open(hosts_file, "r+") as f:  # in place: the bind mount follows the inode
                f.write(text)
                f.truncate()
            results.append(
                run_case(
                    "f",
                    "host 2's hostname resolves to 127.0.0.1 there (Debian's default /etc/hosts)",
                    env,
                    env["RLGEN_TESTHOSTS_HOSTS"],
                    cap=args.cap,
                    out=args.out,
                )
            )
        if case("g"):
            env = up()
            hosts = env["RLGEN_TESTHOSTS_LAUNCHER"] + ":1," + env["RLGEN_TESTHOSTS_ADDR1"] + ":1"
            results.append(
                run_case(
                    "g",
                    "the launching host as rank 0 (its hostname resolves to 127.0.0.1)",
                    env,
                    hosts,
                    cap=args.cap,
                    out=args.out,
                )
            )
    finally:
        sh(str(SCRIPT), "down", timeout=120)

    for r in results:
        rc = "killed at cap" if r.rc is None else str(r.rc)
        after = "" if r.after_fault_s is None else f", {r.after_fault_s} s after the fault"
        print(f"## {r.case}: {r.what}\nexit {rc} after {r.total_s} s{after}")
        if r.leftovers:
            print(f"probe/task processes left in the namespaces after exit: {r.leftovers}")
        for ln in r.key_lines:
            print(f"    {ln[:220]}")
        print()
    (args.out / "results.json").write_text(json.dumps([r.__dict__ for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
