"""Shared pytest settings: `--update-goldens` rewrites snapshot files instead of comparing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hostsupport import testhosts_fixture  # noqa: F401  (the session's one `testhosts` fixture)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.rl.yaml"))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(autouse=True)
def _own_speed_history(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own cache of measured speeds (rlgen.app.history): what one test's runs
    measured must not steer another's ``--policy auto``."""
    monkeypatch.setenv("RLGEN_CACHE_DIR", str(tmp_path_factory.mktemp("rlgen-cache")))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from current output")


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def check_golden(path: Path, actual: str, update: bool) -> None:
    """Compare ``actual`` with the golden file at ``path`` (or rewrite it with --update-goldens)."""
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        if not update:
            pytest.fail(f"golden file {path} was missing and has been written; review and commit it")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from {path}; rerun with --update-goldens if intended"


def drawn(path: Path, timeout: float = 60.0) -> bytes:
    """The bytes of a file a detached process writes (a run's curves.png), once it is there."""
    deadline = time.monotonic() + timeout
    while not path.is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    return path.read_bytes()


def rank_pid(module: str, rank: int) -> int:
    """The process id of Horovod rank ``rank`` of a running build whose rank entry is ``module``
    (``ppo_cartpole.main``), found from ``/proc`` (the kill tests' target)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if module.encode() in cmd and f"HOROVOD_RANK={rank}".encode() in env:
            return int(pid)
    raise AssertionError(f"rank {rank} of {module} not found")
