"""The typed Spec: defaults agree with the schema; the resolved spec is a valid spec that round-trips."""

from __future__ import annotations

import json

import pytest
import yaml

from rlgen.algorithms import ALGORITHMS
from rlgen.api import validate_file, validate_text
from rlgen.dsl.catalog import KNOWN_ENVS
from rlgen.dsl.envinfo import quiet_mujoco
from rlgen.dsl.resolved import plain, resolved
from rlgen.dsl.spec import COMPONENT_DEFAULTS, Checkpoint, Eval, Log, Stop, Train
from rlgen.dsl.specbuild import build_spec

from conftest import EXAMPLES, ROOT

SCHEMA = json.loads((ROOT / "schemas" / "rlgen.schema.json").read_text())


def _props(defname: str) -> dict:
    return SCHEMA["$defs"][defname]["properties"]


@pytest.mark.parametrize("kind", [*ALGORITHMS, "replay", "policy"])
def test_component_defaults_match_the_schema(kind):
    props = _props(f"{kind}_component")
    for key, default in COMPONENT_DEFAULTS[kind].items():
        assert "default" in props[key], f"{kind}.{key} has no default in the schema"
        assert props[key]["default"] == plain(default), f"{kind}.{key}"


def test_train_defaults_match_the_schema():
    props = _props("train")["properties"] if "properties" in _props("train") else _props("train")
    t = Train(total_steps=1)
    assert props["seed"]["default"] == t.seed
    assert props["run_dir"]["default"] == t.run_dir
    for key, cls in (("stop", Stop), ("eval", Eval), ("checkpoint", Checkpoint), ("log", Log)):
        sub = props[key]["properties"]
        for field, value in plain(cls()).items():
            if value is not None:
                assert sub[field]["default"] == value, f"train.{key}.{field}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_resolved_spec_is_valid_and_round_trips(path):
    spec = validate_file(path).spec
    written = resolved(spec)
    text = yaml.safe_dump(written, sort_keys=False)
    again = validate_text(text, "resolved.rl.yaml")
    assert again.ok, [d.message for d in again.diagnostics]
    assert resolved(again.spec) == written
    assert resolved(build_spec(yaml.safe_load(text))) == written


def test_learner_defaults_fill_in():
    spec = validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml").spec
    learner = spec.components["learner"]
    assert learner.get("vf_coef") == 0.5 and learner.get("normalize_advantage") is True
    assert learner.get("gamma") == 0.98  # the spec's own value wins


@pytest.mark.parametrize("env_id", sorted(k for k in KNOWN_ENVS if "Lunar" not in k and "Bipedal" not in k))
def test_known_env_table_agrees_with_gymnasium(env_id):
    gym = pytest.importorskip("gymnasium")
    if env_id.endswith("-v5"):
        pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra (pip install rlgen[mujoco])")
    quiet_mujoco(env_id)  # as rlgen does: no warnings, no MUJOCO_LOG.TXT in the working directory
    env = gym.make(env_id)
    known = KNOWN_ENVS[env_id]
    assert tuple(env.observation_space.shape) == known.observation.shape
    if known.action.kind == "discrete":
        assert int(env.action_space.n) == known.action.n
    else:
        assert tuple(env.action_space.shape) == known.action.shape
        assert float(env.action_space.low[0]) == pytest.approx(known.action.low)
    assert env.spec.max_episode_steps == known.max_episode_steps
