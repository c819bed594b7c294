"""``rlgen init --algo mappo|ippo`` on a PettingZoo env: the reference MAPPO's settings as the
shipped examples write them, a spec that validates, builds and trains, and clear refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.api import validate_file, validate_text
from rlgen.app.scaffold import render
from rlgen.app.scaffold_agents import pettingzoo_ref

from conftest import ROOT

pytest.importorskip("mpe2.simple_spread_v3")


def rlgen(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlgen", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_env_names_pettingzoo_or_gymnasium():
    assert pettingzoo_ref("simple_spread_v3") == "mpe2.simple_spread_v3"
    assert pettingzoo_ref("mpe2.simple_spread_v3") == "mpe2.simple_spread_v3"
    assert pettingzoo_ref("my_envs.zoo:make") == "my_envs.zoo:make"
    for gym_id in ("CartPole-v1", "ALE/Pong-v5", "NoSuchEnv-v9", "cartpole"):
        assert pettingzoo_ref(gym_id) is None, gym_id


@pytest.mark.parametrize("algo", ["mappo", "ippo"])
@pytest.mark.parametrize("env", ["simple_spread_v3", "mpe2.simple_spread_v3"])
def test_the_spec_is_the_example_setting_for_setting(algo, env):
    text = render(f"{algo}-spread", algo, env)
    result = validate_text(text, "init.rl.yaml")
    assert result.ok and not result.diagnostics, [d.message for d in result.diagnostics]
    ours, theirs = result.spec, validate_file(ROOT / "examples" / f"{algo}-simple-spread.rl.yaml").spec
    for field in ("pettingzoo", "kwargs", "num_envs", "state", "share"):
        assert getattr(ours.env, field) == getattr(theirs.env, field), field
    assert (ours.env.state == "concat") == (algo == "mappo")
    assert ours.networks == theirs.networks
    for name in ("actor", "critic", "buffer", "learner"):
        assert ours.components[name].kind == theirs.components[name].kind, name
        assert ours.components[name].settings == theirs.components[name].settings, name
    assert ours.loop == theirs.loop and ours.partitions == theirs.partitions
    assert (ours.train.total_steps, ours.train.stop, ours.train.eval) == (
        theirs.train.total_steps, theirs.train.stop, theirs.train.eval,
    )  # fmt: skip
    assert ours.train.stop.mean_return is None
    assert "\n  # No stop:" in text  # a stop only as a comment: no early stop by default


def test_any_pettingzoo_env_whose_agents_share_their_spaces(tmp_path):
    """A module or a factory; the settings are simple_spread's and the file says so."""
    (tmp_path / "my_envs.py").write_text(
        "from mpe2 import simple_spread_v3\n\n\n"
        "def four(continuous=False):\n"
        "    return simple_spread_v3.parallel_env(N=4, continuous_actions=continuous)\n"
    )
    r = rlgen("init", "four", "--env", "my_envs:four", cwd=tmp_path)
    assert r.returncode == 0 and "(mappo on my_envs:four)" in r.stdout, r.stderr
    text = (tmp_path / "four.rl.yaml").read_text()
    assert "4 agents" in text and "each observing 24 values" in text and "(96 values)" in text
    assert "settings for MPE's simple_spread" in text
    assert "\n  # kwargs:" in text and "\n    # time_limit: terminal" in text
    r = rlgen("validate", "four.rl.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = rlgen("init", "ref", "--algo", "ippo", "--env", "mpe2.simple_reference_v3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_refusals_say_why_and_what_to_do(tmp_path):
    (tmp_path / "my_envs.py").write_text(
        "from mpe2 import simple_spread_v3\n\n\n"
        "def boxes():\n"
        "    return simple_spread_v3.parallel_env(continuous_actions=True)\n"
    )
    cases = [
        (("--algo", "mappo", "--env", "simple_tag_v3"), "different spaces", "not supported yet"),
        (("--algo", "ippo", "--env", "CartPole-v1"), "needs a PettingZoo env", "--algo ppo"),
        (("--algo", "ppo", "--env", "simple_spread_v3"), "PettingZoo env", "--algo mappo or ippo"),
        (("--algo", "mappo", "--env", "my_envs:boxes"), "Discrete actions", "continuous_actions false"),
        (("--algo", "mappo", "--env", "mpe2.no_such_env_v1"), "cannot make the PettingZoo env", "No module"),
    ]
    for args, why, what in cases:
        r = rlgen("init", "x", *args, cwd=tmp_path)
        assert r.returncode == 2 and why in r.stderr and what in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.rl.yaml").exists()


def test_the_written_file_is_deterministic(tmp_path):
    for algo in ("mappo", "ippo"):
        assert rlgen("init", "a", "--algo", algo, "--env", "simple_spread_v3", cwd=tmp_path).returncode == 0
        first = (tmp_path / "a.rl.yaml").read_bytes()
        r = rlgen("init", "a", "--algo", algo, "--env", "simple_spread_v3", "--force", cwd=tmp_path)
        assert r.returncode == 0 and (tmp_path / "a.rl.yaml").read_bytes() == first
        assert first.decode() == render("a", algo, "simple_spread_v3")
        (tmp_path / "a.rl.yaml").unlink()


def test_recurrent_mappo_is_the_rmappo_example_setting_for_setting():
    """`rlgen init --recurrent` writes the reference's rmappo: examples/rmappo-simple-spread.rl.yaml."""
    text = render("rmappo-spread", "mappo", "simple_spread_v3", recurrent=True)
    result = validate_text(text, "init.rl.yaml")
    assert result.ok and not result.diagnostics, [d.message for d in result.diagnostics]
    ours, theirs = result.spec, validate_file(ROOT / "examples" / "rmappo-simple-spread.rl.yaml").spec
    assert ours.networks == theirs.networks and ours.networks["pi"].recurrent == {"size": 64, "layer_norm": True}
    for name in ("actor", "critic", "buffer", "learner"):
        assert ours.components[name].settings == theirs.components[name].settings, name
    assert ours.loop == theirs.loop and ours.partitions == theirs.partitions


def test_recurrent_is_for_the_agent_learners(tmp_path):
    r = rlgen("init", "a", "--algo", "ppo", "--env", "CartPole-v1", "--recurrent", cwd=tmp_path)
    assert r.returncode != 0 and "mappo and ippo" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a.rl.yaml").exists()


def trained_steps(tmp_path) -> int:
    """Train the written agents.rl.yaml for 2 iterations on 8 env copies; its env steps."""
    r = rlgen(
        "run", "agents.rl.yaml", "--iterations", 2, "--set", "env.num_envs=8", "--run-dir", "run", "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    import json

    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    return [row["env_steps"] for row in rows if "mean_return" in row][-1]


@pytest.mark.parametrize("algo", ["mappo", "ippo"])
def test_the_recurrent_spec_trains(tmp_path, algo):
    r = rlgen("init", "agents", "--algo", algo, "--env", "simple_spread_v3", "--recurrent", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert trained_steps(tmp_path) == 2 * 26 * 8


@pytest.mark.parametrize("algo", ["mappo", "ippo"])
def test_the_written_spec_builds_and_trains_under_single(tmp_path, algo):
    r = rlgen("init", "agents", "--algo", algo, "--env", "simple_spread_v3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = rlgen("build", "agents.rl.yaml", "-o", "build", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "build" / "plan.json").is_file()
    assert trained_steps(tmp_path) == 2 * 25 * 8


def test_init_never_imports_tensorflow(tmp_path):
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rlgen.app.scaffold import InitRequest, init\n"
        "init(InitRequest('a', 'simple_spread_v3', output=Path('a.rl.yaml')))\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "kind: mappo" in (tmp_path / "a.rl.yaml").read_text()  # --algo defaults to mappo here
