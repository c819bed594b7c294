"""Shell completion (`rlgen completion bash|zsh|fish`), asked for the way a shell asks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("argcomplete")


def complete(line: str, tmp_path) -> list[str]:
    """What rlgen offers for ``line`` with the cursor at its end (argcomplete's protocol)."""
    out = tmp_path / "completions"
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line))}
    env["_ARGCOMPLETE_STDOUT_FILENAME"] = str(out)
    r = subprocess.run([sys.executable, "-m", "rlgen"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return out.read_text().split()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_shell_gets_a_script_that_registers_rlgen(shell):
    r = subprocess.run([sys.executable, "-m", "rlgen", "completion", shell], capture_output=True, text=True)
    assert r.returncode == 0 and "rlgen" in r.stdout and "_ARGCOMPLETE" in r.stdout


def test_commands_options_and_policies_complete(tmp_path):
    assert complete("rlgen va", tmp_path) == ["validate"]
    assert {"init", "plot", "run", "bench", "completion"} <= set(complete("rlgen ", tmp_path))
    assert complete("rlgen run spec.rl.yaml --policy pi", tmp_path) == ["pipelined-inference"]
    assert "--recalibrate" in complete("rlgen run spec.rl.yaml --re", tmp_path)
