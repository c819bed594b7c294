"""scripts/testhosts.sh: separate hosts on this machine, reached over ssh, running Horovod across them.

Skipped, with the reason, where the machine cannot host them (see tests/hostsupport.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostsupport import (
    PROBE,
    TestHosts,
    bring_up,
    leftovers,
    run_script,
    script_env,
)

PROBE_TIMEOUT_S = 90  # typically 12-17 s here; 30 s with the 2 cores shared by other test runs


def test_ssh_reaches_each_host_in_its_own_namespace(testhosts: TestHosts) -> None:
    assert len(testhosts.names) == 2 and len(set(testhosts.addrs)) == 2
    for name, addr in zip(testhosts.names, testhosts.addrs, strict=True):
        for target in (name, addr):  # by name (ssh config alias) and by address (what horovodrun uses)
            r = testhosts.ssh(
                target, f"hostname; ip -4 -o addr show {testhosts.iface}; stat -L -c %i /proc/self/ns/net"
            )
            assert r.returncode == 0, r.stderr
            hostname, addr_line, ns_inode = r.stdout.strip().splitlines()
            assert hostname == name
            assert f" {addr}/24 " in addr_line
            assert ns_inode == str(os.stat(f"/run/netns/{name}").st_ino), "command ran outside the host's namespace"
    # the launcher reaches them over the bridge, and nothing else answers there
    assert testhosts.launcher not in testhosts.addrs


def test_status_and_env(testhosts: TestHosts) -> None:
    r = testhosts.script("status", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in testhosts.names:
        assert f"{name} " in r.stdout and "ssh yes" in r.stdout
    env = testhosts.script("env").stdout
    assert f"RLGEN_TESTHOSTS_HOSTS='{testhosts.hosts_arg()}'" in env
    assert f"RLGEN_TESTHOSTS_IFACE='{testhosts.iface}'" in env


def test_plain_horovod_job_spans_both_hosts(testhosts: TestHosts) -> None:
    """allreduce + allgather across the two namespaces, launched by horovodrun over ssh from here."""
    cmd = [*testhosts.horovodrun(2), sys.executable, str(PROBE)]
    r = subprocess.run(
        cmd,
        env=testhosts.run_env(),
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        cwd=Path(PROBE).parent,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    line = next((ln for ln in r.stdout.splitlines() if "PROBE " in ln), None)
    assert line, out[-4000:]
    doc = json.loads(line.split("PROBE ", 1)[1])
    assert doc["ok"] and doc["size"] == 2 and doc["sum"] == 1 and doc["ranks"] == [0, 1]
    hosts = {h["rank"]: h for h in doc["hosts"]}
    for rank, (name, addr) in enumerate(zip(testhosts.names, testhosts.addrs, strict=True)):
        assert hosts[rank]["hostname"] == name
        assert hosts[rank]["netns"] == name
        assert hosts[rank]["address"] == addr
        assert hosts[rank]["horovod_hostname"] == addr


def test_down_removes_everything_and_up_cleans_up_after_a_failure(tmp_path: Path) -> None:
    """A separate one-host setup (own prefix and subnet), so the session's hosts stay up."""
    prefix, subnet, state = "rlgu", "192.168.215", tmp_path / "state"
    env = script_env(prefix, subnet, state)
    hosts = bring_up(state, n=1, prefix=prefix, subnet=subnet)
    assert hosts.ssh(hosts.names[0], "true").returncode == 0
    assert leftovers(prefix, state), "nothing was set up"
    try:
        r = run_script(env, "down")
        assert r.returncode == 0, r.stderr
        assert leftovers(prefix, state) == []
        assert run_script(env, "down").returncode == 0  # idempotent
        # `up` that fails midway (here: an sshd that will not start) removes what it made
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "sshd").write_text("#!/bin/sh\necho 'fake sshd: refusing' >&2\nexit 1\n")
        (fake / "sshd").chmod(0o755)
        r = run_script({**env, "PATH": f"{fake}{os.pathsep}{env['PATH']}"}, "up", "1")
        assert r.returncode == 1, r.stderr
        assert "removing what was made" in r.stderr
        assert leftovers(prefix, state) == []
    finally:
        run_script(env, "down")


@pytest.mark.parametrize("args", [["up", "0"], ["up", "x"], ["exec"], ["link", "h1", "sideways"], ["frobnicate"]])
def test_usage_errors(args: list[str], tmp_path: Path) -> None:
    r = run_script(script_env("rlgv", "192.168.216", tmp_path / "state"), *args)
    assert r.returncode == 2, r.stderr


def _fake_bin(where: Path, **scripts: str) -> str:
    """PATH with a new directory of fake commands first."""
    fake = where
    fake.mkdir()
    for name, body in scripts.items():
        (fake / name.replace("_", "-")).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name.replace("_", "-")).chmod(0o755)
    return f"{fake}{os.pathsep}{os.environ['PATH']}"


def test_skips_with_a_reason_where_hosts_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not root, no `ip netns`, no sshd and apt-get failing: a skip with the reason, not a failure."""
    state = tmp_path / "state"
    with monkeypatch.context() as m:
        m.setattr(os, "geteuid", lambda: 1000)
        with pytest.raises(pytest.skip.Exception, match="need root"):
            bring_up(state, n=1, prefix="rlgw", subnet="192.168.217")
    if os.geteuid() != 0:
        pytest.skip("the script's own checks below need root")
    env = script_env("rlgw", "192.168.217", state)
    r = run_script({**env, "PATH": _fake_bin(tmp_path / "no-netns", ip="exit 1")}, "up", "1")
    assert r.returncode == 77 and "'ip netns' does not work here" in r.stderr, r.stderr
    no_apt = _fake_bin(tmp_path / "no-apt", apt_get="exit 100")
    r = run_script({**env, "RLGEN_TESTHOSTS_SSHD": str(tmp_path / "no-sshd"), "PATH": no_apt}, "up", "1")
    assert r.returncode == 77 and "apt-get install openssh-server' failed" in r.stderr, r.stderr
    assert leftovers("rlgw", state) == []
