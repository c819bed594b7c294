"""``rlgen init``: a commented starting spec that validates and trains as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlgen.api import validate_file, validate_text
from rlgen.app.scaffold import ZOO, render

from conftest import ROOT

HOROVOD = (Path(sys.executable).with_name("horovodrun")).exists()


def rlgen(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlgen", *map(str, args)], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("algo", "env"),
    sorted(ZOO)
    + [("ppo", "MountainCarContinuous-v0"), ("a2c", "Pendulum-v1"), ("dqn", "MountainCar-v0")]
    + [("sac", "Hopper-v5"), ("td3", "MountainCarContinuous-v0")],
)
def test_every_algorithm_and_env_it_knows_or_not_gives_a_valid_spec(algo, env):
    text = render(f"{algo}-test", algo, env)
    result = validate_text(text, "init.rl.yaml")
    assert result.ok, [d.message for d in result.diagnostics]
    assert not result.diagnostics, [d.message for d in result.diagnostics]  # no warnings either
    tuned = (algo, env) in ZOO
    assert ("# Zoo" in text) == tuned
    assert result.spec.env.id == env and result.spec.deploy.policy == "single"


def test_ppo_cartpole_is_the_zoo_example_setting_for_setting():
    ours = validate_text(render("ppo-cartpole", "ppo", "CartPole-v1"), "init.rl.yaml").spec
    example = validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml").spec
    assert ours.env.num_envs == example.env.num_envs
    assert ours.components["learner"].settings == example.components["learner"].settings
    assert [b.repeat for b in ours.loop.blocks] == [b.repeat for b in example.loop.blocks]
    assert (ours.train.total_steps, ours.train.stop.mean_return) == (example.train.total_steps, 475)


@pytest.mark.parametrize(
    ("env", "spec"),
    [
        ("HalfCheetah-v5", ROOT / "examples" / "ppo-halfcheetah.rl.yaml"),
        ("MountainCar-v0", ROOT / "benchmarks" / "specs" / "ppo-mountaincar.rl.yaml"),
    ],
)
def test_ppo_with_the_zoos_normalisation_is_our_zoo_spec_setting_for_setting(env, spec):
    if env.startswith("HalfCheetah"):
        pytest.importorskip("mujoco")
    ours = validate_text(render("ppo", "ppo", env), "init.rl.yaml").spec
    theirs = validate_file(spec).spec
    assert ours.env.normalize == theirs.env.normalize is not None
    assert ours.env.num_envs == theirs.env.num_envs
    assert ours.networks == theirs.networks

    def actor(spec):  # `auto` and `gaussian` are the same distribution on Box actions
        return {k: v for k, v in spec.components["actor"].settings.items() if k != "distribution"}

    assert actor(ours) == actor(theirs)
    assert ours.components["learner"].settings == theirs.components["learner"].settings
    assert [b.repeat for b in ours.loop.blocks] == [b.repeat for b in theirs.loop.blocks]


def test_sac_with_gsde_is_the_zoo_example_setting_for_setting():
    ours = validate_text(render("sac", "sac", "MountainCarContinuous-v0"), "init.rl.yaml").spec
    theirs = validate_file(ROOT / "examples" / "sac-mountaincar-continuous.rl.yaml").spec
    assert ours.networks == theirs.networks
    for name in ("actor", "replay", "learner"):
        assert ours.components[name].settings == theirs.components[name].settings, name
    assert [(b.repeat, b.after) for b in ours.loop.blocks] == [(b.repeat, b.after) for b in theirs.loop.blocks]
    assert ours.train.total_steps == theirs.train.total_steps


def test_settings_are_written_exactly():
    """Every tuned number reads back as itself (2.0633e-5 is not 2.1e-05)."""
    import yaml

    from rlgen.app.scaffold_common import flow as _flow

    for value in (2.0633e-5, 0.000401762, 3.0e-4, 1.0e-5, 1.0e-8, 0.0, 1.0e6, 0.58096, -2.0):
        assert yaml.safe_load(_flow(value)) == value


def test_the_command_writes_only_what_validates(tmp_path):
    r = rlgen("init", "my-agent", "--algo", "a2c", "--env", "CartPole-v1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "my-agent.rl.yaml").is_file() and "rlgen run my-agent.rl.yaml" in r.stdout
    r = rlgen("init", "my-agent", "--env", "CartPole-v1", cwd=tmp_path)
    assert r.returncode == 2 and "exists" in r.stderr  # never overwrites without --force
    r = rlgen("init", "Bad Name", "--env", "CartPole-v1", cwd=tmp_path)
    assert r.returncode == 1 and "not written" in r.stderr and not (tmp_path / "Bad Name.rl.yaml").exists()
    r = rlgen("init", "q", "--algo", "dqn", "--env", "Pendulum-v1", cwd=tmp_path)
    assert r.returncode == 2 and "Discrete" in r.stderr and "Traceback" not in r.stderr
    r = rlgen("init", "q", "--algo", "sac", "--env", "CartPole-v1", cwd=tmp_path)
    assert r.returncode == 2 and "needs Box actions" in r.stderr and "Traceback" not in r.stderr
    r = rlgen("init", "q", "--env", "NoSuchEnv-v9", cwd=tmp_path)
    assert r.returncode == 2 and "NoSuchEnv-v9" in r.stderr and "Traceback" not in r.stderr


def test_mujoco_envs_are_made_without_warnings_or_a_log_file(tmp_path):
    """gymnasium's Hopper model makes MuJoCo warn (a deprecation) on every env it makes: to
    stdout and into MUJOCO_LOG.TXT in the working directory, which rlgen must not write."""
    pytest.importorskip("mujoco")
    for args in (("init", "hop", "--env", "Hopper-v5"), ("validate", "hop.rl.yaml")):
        r = rlgen(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "deprecated" not in r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hop.rl.yaml"]


@pytest.mark.skipif(not HOROVOD, reason="the full install (scripts/setup.sh)")
@pytest.mark.parametrize(("algo", "env"), [("ppo", "Pendulum-v1"), ("dqn", "CartPole-v1"), ("sac", "Pendulum-v1")])
def test_a_written_spec_trains_as_written(tmp_path, algo, env):
    assert rlgen("init", "agent", "--algo", algo, "--env", env, cwd=tmp_path).returncode == 0
    r = rlgen("run", "agent.rl.yaml", "--iterations", 3, "--quiet", "--run-dir", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "run" / "policy" / "saved_model.pb").is_file()


@pytest.mark.parametrize(
    ("algo", "env", "example"),
    [
        ("ppo", "ALE/Breakout-v5", "ppo-breakout"),
        ("a2c", "ALE/Breakout-v5", "a2c-breakout"),
        ("dqn", "ALE/Pong-v5", "dqn-pong"),
    ],
)
def test_an_atari_game_gets_the_preset_a_cnn_and_the_zoos_atari_settings(tmp_path, algo, env, example):
    pytest.importorskip("ale_py")
    from rlgen.api import build_file

    assert rlgen("init", "game", "--algo", algo, "--env", env, cwd=tmp_path).returncode == 0
    written = tmp_path / "game.rl.yaml"
    result = validate_file(written)
    assert result.ok and not result.diagnostics, [d.message for d in result.diagnostics]
    ours, theirs = result.spec, validate_file(ROOT / "examples" / f"{example}.rl.yaml").spec
    assert ours.env.preset == "atari" and {n.kind for n in ours.networks.values()} == {"cnn"}
    assert ours.env.num_envs == theirs.env.num_envs and ours.networks.keys() == theirs.networks.keys()
    assert {k: c.settings for k, c in ours.components.items()} == {k: c.settings for k, c in theirs.components.items()}
    assert [(b.repeat, b.after) for b in ours.loop.blocks] == [(b.repeat, b.after) for b in theirs.loop.blocks]
    assert ours.train.total_steps >= 10_000_000  # the Zoo's n_timesteps, in whole iterations
    built, build = build_file(written, tmp_path / "build")
    assert built.ok and build is not None and any((tmp_path / "build").rglob("env.py"))


def test_an_atari_a2c_spec_trains_as_written(tmp_path):
    """Its 16 envs of 5 steps, for 2 iterations; only the final evaluation is made short."""
    pytest.importorskip("ale_py")
    assert rlgen("init", "game", "--algo", "a2c", "--env", "ALE/Breakout-v5", cwd=tmp_path).returncode == 0
    short_eval = ["--set", "train.eval.episodes=1", "--set", "env.max_episode_steps=400"]
    r = rlgen("run", "game.rl.yaml", "--iterations", 2, *short_eval, "--quiet", "--run-dir", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "run" / "policy" / "saved_model.pb").is_file()


def test_atari_takes_ppo_a2c_or_dqn_only():
    pytest.importorskip("ale_py")
    from rlgen.app.scaffold_common import ScaffoldError

    with pytest.raises(ScaffoldError, match="ppo, a2c or dqn"):
        render("x", "sac", "ALE/Pong-v5")
