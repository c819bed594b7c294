"""Host lists, hostfiles and the horovodrun options they turn into (no second host needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.dsl.hosts import HostfileError, read_hostfile
from rlgen.launch.hosts import Cluster, HostError, is_local, preflight
from rlgen.runtime import lifeline

from conftest import ROOT


def test_hostfile_lines_become_host_slots(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# the cluster\nnode1 slots=2\n\nnode2   # one slot by default\n10.0.0.7 slots=4\n")
    assert read_hostfile(f) == ["node1:2", "node2:1", "10.0.0.7:4"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node1 slots=two\n", "hosts:1: 'slots=two' is not 'slots=N'"),
        ("node1 slots=0\n", "hosts:1: 'slots=0' is not 'slots=N'"),
        ("node1\nnode2 max_slots=3\n", "hosts:2: 'max_slots=3' is not 'slots=N'"),
        ("# nothing\n\n", "no hosts"),
    ],
)
def test_a_bad_hostfile_names_the_line(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "hosts"
    f.write_text(text)
    with pytest.raises(HostfileError, match=expected.replace("(", r"\(")):
        read_hostfile(f)


def test_horovodrun_options_for_remote_and_local_hosts() -> None:
    remote = Cluster(("node1:1", "node2:2"), "eth1", 2222, "/k/id")
    assert remote.horovodrun_args(3) == [
        "-np", "3", "-H", "node1:1,node2:2", "--disable-cache",
        "--network-interface", "eth1", "--ssh-port", "2222", "--ssh-identity-file", "/k/id",
    ]  # fmt: skip
    assert remote.rank_hosts(3) == ["node1", "node2", "node2"]
    assert remote.ssh("node2", "true")[-4:] == ["-i", "/k/id", "node2", "true"]
    local = Cluster()
    assert local.horovodrun_args(2) == ["-np", "2", "-H", "localhost:2"]
    assert local.remote() == [] and Cluster(("localhost:2",)).remote() == []
    assert is_local("127.0.0.1") and not is_local("node1")


def test_preflight_has_nothing_to_check_on_one_machine(tmp_path: Path) -> None:
    assert preflight(Cluster(("localhost:2",)), 2, tmp_path, tmp_path) is None


def test_an_unresolvable_host_is_named_within_seconds(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text("{}")
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(HostError, match=r"host no-such-host\.invalid \(ranks 0, 1\) cannot be reached over ssh"):
        preflight(Cluster(("no-such-host.invalid:2",)), 2, tmp_path, tmp_path)


def test_beats_mark_a_silent_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that stops beating (its host went down: no connection closes) is reported
    after LOST_BEATS beats; one that keeps beating is not."""
    monkeypatch.setenv("RLGEN_LIFELINE_BEAT", "0.1")
    board = lifeline.Switchboard(beat=0.1)
    ranks = [lifeline.Lifeline(board.address, r, lambda why: None) for r in range(2)]
    try:
        while len(board.ranks) < 2:
            board.poll(0.05)
        ranks[1]._closed = True  # stops beating, keeps its connection open
        silent: list[int] = []
        for _ in range(40):
            board.poll(0.05)
            silent = board.silent()
            if silent:
                break
        assert silent == [1]
    finally:
        for r in ranks:
            r.close()
        board.close()


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlgen", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_run_takes_a_hostfile_and_passes_the_ssh_options(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("node1 slots=1\nnode2 slots=1\n")
    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    r = _run(
        "run", str(spec), "--policy", "actors-learner", "--workers", "2", "--hostfile", "hosts",
        "--network-interface", "eth1", "--ssh-port", "2222", "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "rank 0 (node1): role learner" in r.stdout and "rank 1 (node2): role actor" in r.stdout
    assert "-H node1:1,node2:1 --disable-cache --network-interface eth1 --ssh-port 2222" in r.stdout
    bad = _run("run", str(spec), "--hostfile", "nope", "--dry-run", cwd=tmp_path)
    assert bad.returncode == 2 and "cannot read the hostfile nope" in bad.stderr
    both = _run("run", str(spec), "--hostfile", "hosts", "--hosts", "a:1", "--dry-run", cwd=tmp_path)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_resume_on_too_few_slots_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    build = tmp_path / "build"
    r = _run("build", str(ROOT / "examples" / "ppo-cartpole.rl.yaml"), "--policy", "actors-learner",
             "--workers", "3", "-o", str(build), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (run_dir / "run.json").write_text(json.dumps({"build_dir": str(build), "status": "failed"}))
    r = _run("run", "--resume", str(run_dir), "--hosts", "node1:1,node2:1", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2
    assert "the hosts node1:1,node2:1 offer 2 slot(s) for the build's 3 ranks" in r.stderr
