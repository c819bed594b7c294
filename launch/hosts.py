"""The hosts a run's ranks go to, and the checks made on them before horovodrun starts.

horovodrun reaches every other host over ssh and reports what goes wrong there late (an
unreachable host after up to 50 s of retries), without naming the host (``Process 1 exit
with status code 127``), or not at all (a missing build directory makes the rank start in
``$HOME``). So before a job that spans hosts, :func:`preflight` asks every remote host, in
parallel and within seconds, for what its ranks will need (docs/cluster.md):

* ssh without a password, as horovodrun runs it (``-p``/``-i`` included);
* the launcher's Python at the same path, with Horovod and rlgen importable;
* the build directory (the same ``plan.json``) and the run directory at the same paths:
  every rank writes into the run directory, so it must be one shared filesystem;
* a hostname that resolves to the host's cluster address, not to the loopback (Horovod
  0.28's Gloo binds its collectives to that address, see docs/notes/cluster-notes.md).

Its answer also says how the host reaches the launcher (``SSH_CONNECTION``), which is the
address the launcher's lifeline listens on unless ``--network-interface`` names one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rlgen.dsl.hosts import host_name, host_of_ranks, slots_of

#: Seconds ssh may take to connect to a host (horovodrun's own check retries 5 × 10 s).
SSH_CONNECT_TIMEOUT = 5
#: Seconds one host's whole check may take (connect, start Python, import Horovod).
CHECK_TIMEOUT = 25.0
#: Gloo's timeout for a rank whose peer's host is gone (Horovod's default is 30 s).
GLOO_TIMEOUT = 20

_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


class HostError(Exception):
    """Hosts given wrongly, or a host that cannot run its ranks: the message names it."""


@dataclass(frozen=True)
class Cluster:
    """Where a build's ranks run and how horovodrun reaches the hosts.

    ``hosts`` are ``host:slots`` entries (``-H``); ranks fill them in order, as horovodrun
    and the build's plan place them. The ssh options are horovodrun's own: one port and one
    identity file for every host.
    """

    hosts: tuple[str, ...] = ()
    interface: str | None = None
    ssh_port: int | None = None
    ssh_identity: str | None = None

    def names(self) -> list[str]:
        return [host_name(h) for h in self.hosts]

    def rank_hosts(self, workers: int) -> list[str]:
        """Rank → host name, as the build's plan and horovodrun place them."""
        return host_of_ranks(self.hosts, workers)

    def slots(self) -> int:
        return slots_of(self.hosts)

    def remote(self) -> list[str]:
        """The hosts that are not this machine (each reached over ssh)."""
        return [n for n in self.names() if not is_local(n)]

    def horovodrun_args(self, workers: int) -> list[str]:
        args = ["-np", str(workers), "-H", ",".join(self.hosts) if self.hosts else f"localhost:{workers}"]
        if self.remote():
            # a cached ssh check (~/.horovod, 60 min) would hide a host that went down since
            args.append("--disable-cache")
        if self.interface:
            args += ["--network-interface", self.interface]
        if self.ssh_port:
            args += ["--ssh-port", str(self.ssh_port)]
        if self.ssh_identity:
            args += ["--ssh-identity-file", self.ssh_identity]
        return args

    def ssh(self, host: str, command: str) -> list[str]:
        """The ssh command line for ``command`` on ``host``, as horovodrun would reach it."""
        cmd = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}"]
        cmd += ["-o", "StrictHostKeyChecking=no"]  # horovodrun's own choice: the check must agree with it
        if self.ssh_port:
            cmd += ["-p", str(self.ssh_port)]
        if self.ssh_identity:
            cmd += ["-i", self.ssh_identity]
        return [*cmd, host, command]

    def record(self) -> dict:
        """For ``run.json``: what ``--resume`` launches with unless told otherwise."""
        return {
            "hosts": list(self.hosts),
            "interface": self.interface,
            "ssh_port": self.ssh_port,
            "ssh_identity": self.ssh_identity,
        }


def is_local(name: str) -> bool:
    return name in _LOCAL_NAMES or name.startswith("127.") or name in _own_names()


@functools.cache
def _own_names() -> tuple[str, str]:
    """This machine's hostname and fully qualified name (the latter may ask DNS: once)."""
    return socket.gethostname(), socket.getfqdn()


# What each remote host runs (with the launcher's interpreter): one JSON line.
_PROBE = """
import hashlib, json, os, socket, sys
out = {"hostname": socket.gethostname(), "ssh": os.environ.get("SSH_CONNECTION", ""), "missing": []}
for mod in ("horovod.tensorflow", "rlgen"):
    try:
        __import__(mod)
    except Exception as exc:
        out["missing"].append(f"{mod} ({type(exc).__name__}: {exc})")
try:
    out["address"] = socket.gethostbyname(out["hostname"])
except OSError as exc:
    out["address"] = ""
plan, run = sys.argv[1], sys.argv[2]
out["plan"] = hashlib.sha256(open(plan, "rb").read()).hexdigest() if os.path.isfile(plan) else ""
out["run"] = hashlib.sha256(open(run, "rb").read()).hexdigest() if os.path.isfile(run) else ""
print("RLGEN-PREFLIGHT " + json.dumps(out))
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check(
    cluster: Cluster, host: str, ranks: list[int], build_dir: Path, run_dir: Path, digests: tuple[str, str]
) -> tuple[str | None, dict]:
    """One host's problem (None if it can run its ranks) and its answer. ``digests``: this
    machine's ``plan.json`` and ``run.json``, which the host must see the same."""
    who = f"host {host} ({_ranks(ranks)})"
    plan, run_json = build_dir.resolve() / "plan.json", run_dir.resolve() / "run.json"
    command = shlex.join([sys.executable, "-c", _PROBE, str(plan), str(run_json)])
    try:
        r = subprocess.run(
            cluster.ssh(host, command),
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"{who} did not answer within {CHECK_TIMEOUT:.0f} s", {}
    except FileNotFoundError:
        return "ssh is not installed on this machine: horovodrun reaches other hosts with it", {}
    answer = next((ln for ln in r.stdout.splitlines() if ln.startswith("RLGEN-PREFLIGHT ")), None)
    said = [ln.strip() for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("Warning: Permanently")]
    last = said[-1] if said else f"exit status {r.returncode}"
    if r.returncode == 255:
        return f"{who} cannot be reached over ssh: {last} (check: ssh -o BatchMode=yes {host} true)", {}
    if answer is None:
        if r.returncode == 127:
            return f"{who} has no {sys.executable}: install rlgen there at the same path (docs/cluster.md)", {}
        return f"{who} cannot run {sys.executable}: {last}", {}
    info = json.loads(answer.split(" ", 1)[1])
    if info["missing"]:
        return f"{who} cannot import {'; '.join(info['missing'])} with {sys.executable}", info
    if info["plan"] != digests[0]:
        what = "has no" if not info["plan"] else "has a different"
        return f"{who} {what} build at {build_dir.resolve()}: put builds on a filesystem every host shares", info
    if info["run"] != digests[1]:
        return (
            f"{who} does not see the run directory {run_dir.resolve()}: every rank writes there, so it must be "
            "on a filesystem every host shares (choose one with --run-dir)",
            info,
        )
    if not info["address"] or info["address"].startswith("127."):
        resolved = f"resolves to {info['address']}" if info["address"] else "does not resolve"
        return (
            f"{who}: its hostname '{info['hostname']}' {resolved} there; Horovod's Gloo binds to that address, so "
            "map it to the host's cluster address in its /etc/hosts (docs/cluster.md)",
            info,
        )
    return None, info


def preflight(cluster: Cluster, workers: int, build_dir: Path, run_dir: Path) -> str | None:
    """Check every remote host in parallel (see the module docstring); raise :class:`HostError`
    naming each host that cannot run its ranks. Returns the launcher's address as the first
    remote host reaches it (None when every host is this machine)."""
    ranks_of: dict[str, list[int]] = {}
    for rank, host in enumerate(cluster.rank_hosts(workers)):
        ranks_of.setdefault(host, []).append(rank)
    remote = [h for h in ranks_of if not is_local(h)]
    if not remote:
        return None
    if len(remote) < len(ranks_of):
        local = next(h for h in ranks_of if is_local(h))
        address = _own_address()
        if address.startswith("127."):
            raise HostError(
                f"host {local} ({_ranks(ranks_of[local])}) is this machine, whose hostname "
                f"'{socket.gethostname()}' resolves to {address}: Horovod's Gloo would bind there and the other "
                "hosts could not reach it; map the hostname to this machine's cluster address in /etc/hosts, "
                "or run ranks only on the other hosts"
            )
    digests = (_digest(build_dir / "plan.json"), _digest(run_dir / "run.json"))
    with ThreadPoolExecutor(len(remote)) as pool:
        answers = list(pool.map(lambda h: _check(cluster, h, ranks_of[h], build_dir, run_dir, digests), remote))
    problems = [p for p, _ in answers if p]
    if problems:
        raise HostError("; ".join(problems))
    via = answers[0][1]["ssh"].split()
    return via[0] if via else None


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _own_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return ""


def interface_address(name: str) -> str:
    """This machine's IPv4 address on interface ``name`` (horovodrun's rendezvous uses the same)."""
    import psutil  # a dependency of Horovod

    for addr in psutil.net_if_addrs().get(name, []):
        if addr.family == socket.AF_INET:
            return addr.address
    known = ", ".join(sorted(psutil.net_if_addrs()))
    raise HostError(
        f"this machine has no IPv4 address on interface '{name}' (it has: {known}); horovodrun needs the same "
        "interface name on the launching host and on every host"
    )


def lifeline_bind(cluster: Cluster, seen_as: str | None) -> str:
    """The address the launcher's lifeline listens on: the loopback for a one-machine job."""
    if not cluster.remote():
        return "127.0.0.1"
    if cluster.interface:
        return interface_address(cluster.interface)
    if seen_as:
        return seen_as
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # the route's source address; sends nothing
        probe.connect((cluster.remote()[0], 22))
        return probe.getsockname()[0]
