"""Separate test hosts for pytest: network namespaces with their own sshd (scripts/testhosts.sh).

tests/conftest.py registers the session-scoped fixture once (a module that imported it
would get its own instance, which waits for the first one's lock)::

    def test_something(testhosts):
        r = subprocess.run(testhosts.horovodrun(2) + [sys.executable, "x.py"], env=testhosts.env, ...)

The fixture brings two hosts up once per session and always tears them down. It skips,
with the reason, where the machine cannot host them (not Linux or not root, no working
``ip netns``, no sshd and apt-get cannot install it, another session holding them). The
hosts use their own name prefix, subnet and state directory, so a user's own
``scripts/testhosts.sh up`` is left alone; every horovodrun it builds uses
``--disable-cache``, so runs here never touch the ``~/.horovod`` cache that localhost runs use.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "testhosts.sh"
PROBE = ROOT / "tests" / "hosts" / "allreduce_probe.py"
PREFIX = "rlgt"  # not the script's default (rlgen): leaves a user's own test hosts alone
SUBNET = "192.168.214"
UNAVAILABLE = 77  # the script's exit status for "this machine cannot host them"
LOCK_WAIT_S = 120
HOROVODRUN = str(Path(sys.executable).with_name("horovodrun"))


def script_env(prefix: str, subnet: str, state: Path) -> dict[str, str]:
    return {
        **os.environ,
        "RLGEN_TESTHOSTS_PREFIX": prefix,
        "RLGEN_TESTHOSTS_SUBNET": subnet,
        "RLGEN_TESTHOSTS_STATE": str(state),
    }


def run_script(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def unavailable_reason() -> str | None:
    """Why this machine cannot host test hosts at all, checked without changing anything."""
    if not sys.platform.startswith("linux"):
        return "test hosts need Linux network namespaces"
    if os.geteuid() != 0:
        return f"test hosts need root for network namespaces (running as uid {os.geteuid()})"
    for tool in ("ip", "unshare", "nsenter", "timeout"):  # ssh and sshd: the script installs them
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.get_exec_path() + ["/usr/sbin", "/sbin"]):
            return f"test hosts need '{tool}', which is not installed"
    return None


@dataclass
class TestHosts:
    """Hosts made by ``scripts/testhosts.sh up``: names, addresses and what horovodrun needs."""

    __test__ = False  # not a test class, despite the name

    prefix: str
    subnet: str
    state: Path
    names: list[str]
    addrs: list[str]
    launcher: str
    iface: str
    ssh_config: Path
    env: dict[str, str] = field(repr=False)  # os.environ plus the script's exports (PATH with its ssh wrapper)

    def script(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return run_script(script_env(self.prefix, self.subnet, self.state), *args, timeout=timeout)

    def ssh(self, host: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), host, command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def hosts_arg(self, slots: int = 1) -> str:
        """horovodrun's -H value: every host with ``slots`` slots (by address)."""
        return ",".join(f"{a}:{slots}" for a in self.addrs)

    def horovodrun(self, np: int, hosts: str | None = None, start_timeout: int = 30) -> list[str]:
        """``horovodrun`` across the hosts, with the flags cross-host runs need here."""
        return [
            HOROVODRUN,
            "--gloo",
            "--disable-cache",  # never read or write ~/.horovod/cache.bin (shared with localhost runs)
            "--network-interface",
            self.iface,
            "--start-timeout",
            str(start_timeout),
            "-np",
            str(np),
            "-H",
            hosts or self.hosts_arg(),
        ]

    def run_env(self) -> dict[str, str]:
        """Environment for a horovodrun across the hosts: no HOROVOD_* settings leaking in from elsewhere."""
        env = {k: v for k, v in self.env.items() if not k.startswith("HOROVOD_")}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        return env


def parse_exports(text: str) -> dict[str, str]:
    """``export NAME='value'`` lines of ``testhosts.sh env`` (PATH handled by the caller)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^export ([A-Z0-9_]+=.*)$", line.strip())
        if not m:
            continue
        for word in shlex.split(m.group(1)):
            name, _, value = word.partition("=")
            out[name] = value
    return out


def bring_up(state: Path, n: int = 2, prefix: str = PREFIX, subnet: str = SUBNET) -> TestHosts:
    """``testhosts.sh up N``; skips the calling test when the machine cannot host them."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    env = script_env(prefix, subnet, state)
    had_sshd = any(os.access(p, os.X_OK) for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd"))
    try:
        # apt-get may have to install openssh-server the first time: give it time
        r = run_script(env, "up", str(n), timeout=600)
    except subprocess.TimeoutExpired:
        run_script(env, "down")
        if had_sshd:
            pytest.fail(f"scripts/testhosts.sh up {n} did not finish within 600 s")
        pytest.skip("test hosts unavailable: installing openssh-server did not finish within 600 s")
    if r.returncode == UNAVAILABLE:
        lines = [ln for ln in r.stderr.splitlines() if "unavailable:" in ln] or r.stderr.splitlines()[-1:]
        pytest.skip(f"test hosts unavailable: {lines[-1].split('unavailable:', 1)[-1].strip() if lines else '?'}")
    if r.returncode != 0:
        run_script(env, "down")
        pytest.fail(f"scripts/testhosts.sh up {n} failed (status {r.returncode}):\n{r.stderr[-3000:]}")
    ex = parse_exports(run_script(env, "env").stdout)
    full_env = {**os.environ, **{k: v for k, v in ex.items() if k.startswith("RLGEN_TESTHOSTS_")}}
    full_env["PATH"] = f"{state}/bin{os.pathsep}{os.environ.get('PATH', '')}"
    return TestHosts(
        prefix=prefix,
        subnet=subnet,
        state=state,
        names=ex["RLGEN_TESTHOSTS_NAMES"].split(),
        addrs=ex["RLGEN_TESTHOSTS_ADDRS"].split(),
        launcher=ex["RLGEN_TESTHOSTS_LAUNCHER"],
        iface=ex["RLGEN_TESTHOSTS_IFACE"],
        ssh_config=Path(ex["RLGEN_TESTHOSTS_SSH_CONFIG"]),
        env=full_env,
    )


def leftovers(prefix: str, state: Path) -> list[str]:
    """What of a testhosts setup still exists: namespaces, links, sshd processes, the state directory."""
    found: list[str] = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    found += [f"namespace {ln.split()[0]}" for ln in netns.splitlines() if ln.startswith(f"{prefix}-h")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=10).stdout
    for ln in links.splitlines():
        name = ln.split(":", 2)[1].strip().split("@")[0] if ln.count(":") >= 2 else ""
        if name == f"{prefix}0" or name.startswith(f"{prefix}-h"):
            found.append(f"link {name}")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "sshd" in cmdline and f"{state}/" in cmdline:
            found.append(f"process {proc.name}: {cmdline.strip()}")
    if state.exists():
        found.append(f"state directory {state}")
    return found


def _lock(path: Path) -> int:
    """An exclusive lock held for the session, so two test sessions never share (and tear down) the hosts."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                pytest.skip(f"another test session has held the test hosts ({path}) for over {LOCK_WAIT_S} s")
            time.sleep(1.0)


@pytest.fixture(scope="session", name="testhosts")
def testhosts_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestHosts]:
    """Two hosts, up for the whole session; torn down at its end, whatever happened."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    fd = _lock(Path(os.environ.get("TMPDIR", "/tmp")) / f"{PREFIX}-testhosts.session.lock")
    state = tmp_path_factory.mktemp("testhosts") / "state"
    try:
        hosts = bring_up(state)
        yield hosts
    finally:
        try:
            env = script_env(PREFIX, SUBNET, state)
            r = run_script(env, "down")
            left = leftovers(PREFIX, state)
            if r.returncode != 0 or left:
                pytest.fail(f"testhosts down left {left} (status {r.returncode}): {r.stderr[-2000:]}")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
