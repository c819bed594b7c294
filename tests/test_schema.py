"""The JSON Schema of the .rl.yaml language (schemas/rlgen.schema.json) and the examples.

The schema is the machine-readable form of docs/language.md: these tests check
that it is a valid draft 2020-12 schema, that every property explains itself
(description, examples, defaults that validate), that objects with fixed keys
reject misspelt keys, that the shipped examples validate, and that typical
mistakes are rejected.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "schemas" / "rlgen.schema.json"
EXAMPLES = ROOT / "examples"
SCHEMA_ID = "https://rlgen.dev/schemas/rlgen-1.schema.json"
MODELINE = "# yaml-language-server: $schema=../schemas/rlgen.schema.json"

SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

#: Keywords that hold one subschema, a list of subschemas, or a mapping of subschemas.
ONE = ("items", "additionalProperties", "propertyNames", "not", "then", "else", "contains")
MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
MAPPED = ("properties", "$defs", "dependentSchemas", "patternProperties")

#: Every keyword of the draft 2020-12 vocabularies that this schema may use.
STANDARD_KEYWORDS = {
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "$comment",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "prefixItems",
    "items",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "format",
}


# --- walking the schema -----------------------------------------------------------------------
def pointer(path: tuple[str | int, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def subschemas(schema: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """Every subschema (as a dict) with its path from the root, except `if` conditions."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ONE:
        if key in schema:
            yield from subschemas(schema[key], (*path, key))
    for key in MANY:
        for i, sub in enumerate(schema.get(key, [])):
            yield from subschemas(sub, (*path, key, i))
    for key in MAPPED:
        for name, sub in schema.get(key, {}).items():
            yield from subschemas(sub, (*path, key, name))


def documented_parts(schema: dict) -> list[tuple]:
    """Paths of every property (at any depth) and every $defs entry."""
    return [p for p, _ in subschemas(schema) if len(p) >= 2 and p[-2] in ("properties", "$defs")]


def at(schema: dict, path: tuple) -> Any:
    for p in path:
        schema = schema[p]
    return schema


def sub_validator(schema: dict, path: tuple) -> jsonschema.protocols.Validator:
    """A validator for the subschema at `path`, resolving its $refs against the whole schema."""
    registry = Registry().with_resource(SCHEMA_ID, Resource.from_contents(schema))
    ref = f"{SCHEMA_ID}#{quote(pointer(path), safe='/~')}"
    return jsonschema.Draft202012Validator({"$ref": ref}, registry=registry)


def documentation_problems(schema: dict) -> list[str]:
    problems = []
    for path in documented_parts(schema):
        sub = at(schema, path)
        desc = sub.get("description")
        if not isinstance(desc, str) or not desc.strip():
            problems.append(f"{pointer(path)}: no description")
        examples = sub.get("examples")
        if not isinstance(examples, list) or not examples:
            problems.append(f"{pointer(path)}: no examples")
    return problems


def example_problems(schema: dict) -> list[str]:
    problems = []
    for path, sub in subschemas(schema):
        if not path:
            continue
        values = [("example", v) for v in sub.get("examples", [])]
        if "default" in sub:
            values.append(("default", sub["default"]))
        if not values:
            continue
        validator = sub_validator(schema, path)
        for what, value in values:
            for err in validator.iter_errors(value):
                problems.append(f"{pointer(path)}: {what} {value!r}: {err.message}")
    return problems


def closed(schema: dict, sub: dict) -> bool:
    """Does `sub` reject unknown keys, itself or through every branch it dispatches to?"""
    if sub.get("additionalProperties") is False:
        return True
    if "$ref" in sub and set(sub) <= {"$ref", "description", "examples", "default"}:
        return closed(schema, at(schema, tuple(sub["$ref"].removeprefix("#/").split("/"))))
    branches = [c.get(k) for c in sub.get("allOf", []) for k in ("then", "else")]
    branches += [sub.get("then"), sub.get("else")]
    branches = [b for b in branches if b is not None]
    return bool(branches) and all(closed(schema, b) for b in branches)


def open_object_problems(schema: dict) -> list[str]:
    """Objects with fixed keys (`properties`) must reject unknown keys.

    A mapping keyed by user names has a subschema as `additionalProperties` and
    a `propertyNames` rule instead.
    """
    problems = []
    for path, sub in subschemas(schema):
        if "properties" not in sub:
            continue
        if isinstance(sub.get("additionalProperties"), dict):
            if "propertyNames" not in sub:
                problems.append(f"{pointer(path)}: a mapping without propertyNames")
        elif not closed(schema, sub):
            problems.append(f"{pointer(path)}: unknown keys are not rejected")
    return problems


# --- the schema itself --------------------------------------------------------------------------
def test_schema_is_valid_draft_2020_12() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] == SCHEMA_ID
    assert SCHEMA.get("title") and SCHEMA.get("description")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert jsonschema.validators.validator_for(SCHEMA) is jsonschema.Draft202012Validator


def test_schema_uses_only_standard_keywords() -> None:
    unknown = {
        f"{pointer(path)}: {key}" for path, sub in subschemas(SCHEMA) for key in sub if key not in STANDARD_KEYWORDS
    }
    assert not unknown


def test_schema_file_is_formatted() -> None:
    text = SCHEMA_PATH.read_text(encoding="utf-8")
    assert text == json.dumps(SCHEMA, indent=2, ensure_ascii=False) + "\n"


def test_top_level_properties_in_docs_order() -> None:
    assert list(SCHEMA["properties"]) == [
        "rlgen",
        "name",
        "description",
        "env",
        "networks",
        "components",
        "loop",
        "partitions",
        "deploy",
        "train",
    ]
    assert SCHEMA["required"] == ["rlgen", "name", "env", "components", "loop", "train"]


def test_every_property_has_description_and_examples() -> None:
    assert len(documented_parts(SCHEMA)) > 100
    assert documentation_problems(SCHEMA) == []


def test_every_example_and_default_validates() -> None:
    assert example_problems(SCHEMA) == []


def test_objects_with_fixed_keys_reject_unknown_keys() -> None:
    assert open_object_problems(SCHEMA) == []


def test_the_checks_above_can_fail() -> None:
    broken = copy.deepcopy(SCHEMA)
    mlp = broken["$defs"]["mlp_network"]
    del mlp["properties"]["hidden"]["description"]
    mlp["properties"]["activation"]["examples"] = ["swish"]
    mlp["properties"]["init"]["default"] = "zeros"
    del broken["$defs"]["dqn_component"]["additionalProperties"]
    assert documentation_problems(broken) == ["/$defs/mlp_network/properties/hidden: no description"]
    assert len(example_problems(broken)) == 2
    assert open_object_problems(broken) == [
        "/$defs/component: unknown keys are not rejected",  # it dispatches to dqn_component
        "/$defs/dqn_component: unknown keys are not rejected",
    ]


#: Defaults stated in docs/language.md, by schema location.
DOC_DEFAULTS = {
    ("properties", "description"): "",
    ("properties", "networks"): {},
    ("properties", "partitions"): {},
    ("properties", "deploy"): {"policy": "single"},
    ("$defs", "env", "properties", "backend"): "gymnasium",
    ("$defs", "env", "properties", "num_envs"): 1,
    ("$defs", "env", "properties", "kwargs"): {},
    ("$defs", "mlp_network", "properties", "hidden"): [64, 64],
    ("$defs", "mlp_network", "properties", "activation"): "tanh",
    ("$defs", "mlp_network", "properties", "init"): "orthogonal",
    ("$defs", "custom_network", "properties", "args"): {},
    ("$defs", "policy_component", "properties", "distribution"): "auto",
    ("$defs", "policy_component", "properties", "log_std_init"): 0.0,
    ("$defs", "qvalue_component", "properties", "exploration"): {
        "initial": 1.0,
        "final": 0.05,
        "fraction": 0.1,
    },
    ("$defs", "replay_component", "properties", "capacity"): 1_000_000,
    ("$defs", "replay_component", "properties", "batch_size"): 32,
    ("$defs", "ppo_component", "properties", "lr"): 3.0e-4,
    ("$defs", "ppo_component", "properties", "gamma"): 0.99,
    ("$defs", "ppo_component", "properties", "gae_lambda"): 0.95,
    ("$defs", "ppo_component", "properties", "clip"): 0.2,
    ("$defs", "ppo_component", "properties", "clip_value"): None,
    ("$defs", "ppo_component", "properties", "epochs"): 10,
    ("$defs", "ppo_component", "properties", "minibatch"): 64,
    ("$defs", "ppo_component", "properties", "ent_coef"): 0.0,
    ("$defs", "ppo_component", "properties", "vf_coef"): 0.5,
    ("$defs", "ppo_component", "properties", "max_grad_norm"): 0.5,
    ("$defs", "ppo_component", "properties", "normalize_advantage"): True,
    ("$defs", "ppo_component", "properties", "optimizer"): {"kind": "adam", "eps": 1.0e-5},
    ("$defs", "a2c_component", "properties", "lr"): 7.0e-4,
    ("$defs", "a2c_component", "properties", "gamma"): 0.99,
    ("$defs", "a2c_component", "properties", "gae_lambda"): 1.0,
    ("$defs", "a2c_component", "properties", "ent_coef"): 0.0,
    ("$defs", "a2c_component", "properties", "vf_coef"): 0.5,
    ("$defs", "a2c_component", "properties", "max_grad_norm"): 0.5,
    ("$defs", "a2c_component", "properties", "normalize_advantage"): False,
    ("$defs", "a2c_component", "properties", "optimizer"): {
        "kind": "rmsprop",
        "alpha": 0.99,
        "eps": 1.0e-5,
    },
    ("$defs", "dqn_component", "properties", "lr"): 1.0e-4,
    ("$defs", "dqn_component", "properties", "gamma"): 0.99,
    ("$defs", "dqn_component", "properties", "tau"): 1.0,
    ("$defs", "dqn_component", "properties", "double"): False,
    ("$defs", "dqn_component", "properties", "max_grad_norm"): 10.0,
    ("$defs", "dqn_component", "properties", "optimizer"): {"kind": "adam", "eps": 1.0e-8},
    ("$defs", "custom_component", "properties", "args"): {},
    ("$defs", "custom_component", "properties", "placement"): "compute",
    ("$defs", "block", "properties", "repeat"): 1,
    ("$defs", "block", "properties", "every"): 1,
    ("$defs", "block", "properties", "after"): 0,
    ("$defs", "deploy", "properties", "policy"): "single",
    ("$defs", "deploy", "properties", "workers"): 1,
    ("$defs", "deploy", "properties", "hosts"): [],
    ("$defs", "train", "properties", "seed"): 0,
    ("$defs", "train", "properties", "stop"): {},
    ("$defs", "train", "properties", "eval"): {"every": 0},
    ("$defs", "train", "properties", "checkpoint"): {"every": 0, "keep": 3},
    ("$defs", "train", "properties", "log"): {"every": 10, "tensorboard": True},
    ("$defs", "train", "properties", "run_dir"): "runs",
}


@pytest.mark.parametrize("path", list(DOC_DEFAULTS), ids=pointer)
def test_defaults_are_the_documented_ones(path: tuple) -> None:
    sub = at(SCHEMA, path)
    assert "default" in sub, f"{pointer(path)} has no default"
    assert sub["default"] == DOC_DEFAULTS[path]
    assert type(sub["default"]) is type(DOC_DEFAULTS[path])


# --- the examples -----------------------------------------------------------------------------
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.rl.yaml"))


def test_the_examples_are_there() -> None:
    names = {p.name for p in EXAMPLE_FILES}
    assert {
        "ppo-cartpole.rl.yaml",
        "ppo-pendulum.rl.yaml",
        "a2c-cartpole.rl.yaml",
        "dqn-cartpole.rl.yaml",
        "custom-network.rl.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_validates(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == MODELINE
    data = yaml.safe_load(text)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(data)]
    assert errors == []
    assert data["name"] == path.name.removesuffix(".rl.yaml")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_custom_parts_exist(path: Path) -> None:
    """An `impl` whose module sits next to the example names something defined there."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    parts = [*data.get("networks", {}).values(), *data["components"].values()]
    for impl in [p["impl"] for p in parts if "impl" in p]:
        module, name = impl.split(":")
        source = EXAMPLES / f"{module.replace('.', '/')}.py"
        if source.exists():
            tree = ast.parse(source.read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            assert name in defined, f"{impl}: {name} is not defined in {source.name}"


# --- valid and invalid documents ------------------------------------------------------------
def base() -> dict[str, Any]:
    """A small valid PPO spec."""
    return {
        "rlgen": 1,
        "name": "ppo-cartpole",
        "env": {"id": "CartPole-v1", "num_envs": 8},
        "networks": {"pi": {"kind": "mlp"}, "v": {"kind": "mlp", "hidden": [64, 64]}},
        "components": {
            "actor": {"kind": "policy", "network": "pi"},
            "critic": {"kind": "value", "network": "v"},
            "buffer": {"kind": "rollout"},
            "learner": {"kind": "ppo", "policy": "actor", "value": "critic"},
        },
        "loop": {
            "init": ["env.reset() -> obs"],
            "rollout": {
                "repeat": 32,
                "do": [
                    "actor.act(obs) -> action, logp",
                    "critic.value(obs) -> value",
                    "env.step(action) -> next_obs, reward, terminated, truncated",
                    "buffer.insert(obs, action, reward, terminated, truncated, logp, value)",
                ],
                "carry": {"obs": "next_obs"},
            },
            "learn": ["learner.update(buffer, obs) -> metrics"],
        },
        "partitions": {
            "env": {"at": "env.step", "send": ["action"], "receive": ["next_obs", "reward", "terminated", "truncated"]},
            "rollout": {"after": "rollout", "send": ["buffer", "obs"], "receive": ["weights"]},
            "gradients": {"at": "learner.update", "reduce": ["gradients"]},
        },
        "train": {"total_steps": 100000},
    }


def edit(doc: dict, path: str, value: Any) -> dict:
    """Set (or, with value DELETE, remove) the key at a dotted path."""
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


DELETE = object()


def errors_of(doc: dict) -> list[jsonschema.ValidationError]:
    return list(VALIDATOR.iter_errors(doc))


def test_base_document_is_valid() -> None:
    assert errors_of(base()) == []


VALID = {
    "env factory without id": [
        (
            "env",
            {
                "factory": "my_pkg.envs:make_maze",
                "kwargs": {"size": 8},
                "spaces": {"observation": {"shape": [64]}, "action": {"n": 4}},
            },
        )
    ],
    "in-graph env": [("env.backend", "tensorflow")],
    "linear schedules": [
        ("components.learner.lr", {"schedule": "linear", "start": 1.0e-3, "end": 0.0}),
        ("components.learner.clip", {"schedule": "linear", "start": 0.2, "end": 0.0}),
    ],
    "rmsprop": [("components.learner.optimizer", {"kind": "rmsprop", "alpha": 0.99, "eps": 1e-5})],
    "tf-like rmsprop": [
        ("components.learner.optimizer", {"kind": "rmsprop", "alpha": 0.99, "eps": 1e-5, "tf_like": True})
    ],
    "custom network": [
        ("networks.pi", {"kind": "custom", "impl": "custom_nets:ResidualMLP", "args": {"width": 64, "Blocks_2": 2}})
    ],
    "custom component": [
        (
            "components.tracker",
            {
                "kind": "custom",
                "impl": "a.b.c:Tracker",
                "placement": "cpu",
                "methods": {"observe": {"inputs": ["obs", "reward"]}},
            },
        )
    ],
    "clip_value null": [("components.learner.clip_value", None)],
    "deploy": [("deploy", {"policy": "multi-learner", "workers": 4, "hosts": ["node-1.example.org:2", "10.0.0.2:2"]})],
    "train sections": [
        (
            "train",
            {
                "total_steps": 1,
                "seed": 7,
                "stop": {"mean_return": -250},
                "eval": {"every": 0},
                "checkpoint": {"every": 0, "keep": 1},
                "log": {"every": 10, "tensorboard": False},
                "run_dir": "experiments/run..1",
            },
        )
    ],
    "call with extra spaces": [("loop.learn.0", "  learner.update( buffer ,obs )->metrics ")],
    "partitions named like cuts": [
        ("partitions", {"env": {"at": "env.step", "send": ["action"], "receive": ["next_obs"]}})
    ],
}


@pytest.mark.parametrize("edits", list(VALID.values()), ids=list(VALID))
def test_valid_variants(edits: list[tuple[str, Any]]) -> None:
    doc = base()
    for path, value in edits:
        edit(doc, path, value)
    assert [e.message for e in errors_of(doc)] == []


INVALID = {
    "unknown top-level key": ("seed", 1),
    "misspelt top-level key": ("netwroks", {}),
    "wrong version": ("rlgen", 2),
    "missing train": ("train", DELETE),
    "name with capitals": ("name", "PPO-CartPole"),
    "env without id or factory": ("env.id", DELETE),
    "env id with spaces": ("env.id", "Cart Pole"),
    "zero envs": ("env.num_envs", 0),
    "unknown backend": ("env.backend", "jax"),
    "unknown network kind": ("networks.pi.kind", "lstm"),
    "unknown activation": ("networks.pi.activation", "swish"),
    "hidden size 0": ("networks.pi.hidden", [64, 0]),
    "mlp with impl": ("networks.pi.impl", "a:b"),
    "custom network without impl": ("networks.pi", {"kind": "custom"}),
    "bad impl (no colon)": ("networks.pi", {"kind": "custom", "impl": "my_pkg.nets.ConvTorso"}),
    "bad impl (two colons)": ("networks.pi", {"kind": "custom", "impl": "my_pkg:nets:Conv"}),
    "bad network name": ("networks.Pi", {"kind": "mlp"}),
    "unknown component kind": ("components.learner.kind", "ppo2"),
    "component without kind": ("components.learner.kind", DELETE),
    "gamma 1.5": ("components.learner.gamma", 1.5),
    "gae_lambda -0.1": ("components.learner.gae_lambda", -0.1),
    "lr 0": ("components.learner.lr", 0),
    "clip negative": ("components.learner.clip", -0.2),
    "epochs 0": ("components.learner.epochs", 0),
    "unknown schedule": ("components.learner.lr", {"schedule": "cosine", "start": 1e-3, "end": 0}),
    "ppo field on a2c": ("components.learner", {"kind": "a2c", "policy": "actor", "value": "critic", "epochs": 10}),
    "adam with alpha": ("components.learner.optimizer", {"kind": "adam", "alpha": 0.9, "eps": 1e-5}),
    "adam with tf_like": ("components.learner.optimizer", {"kind": "adam", "eps": 1e-5, "tf_like": True}),
    "policy without network": ("components.actor.network", DELETE),
    "unknown distribution": ("components.actor.distribution", "beta"),
    "replay capacity 0": ("components.buffer", {"kind": "replay", "capacity": 0}),
    "custom without methods": ("components.x", {"kind": "custom", "impl": "a:b"}),
    "unknown value type": ("components.x", {"kind": "custom", "impl": "a:b", "methods": {"f": {"inputs": ["tensor"]}}}),
    "bad call (no arrow target)": ("loop.learn.0", "learner.update(buffer, obs) ->"),
    "bad call (no parens)": ("loop.learn.0", "learner.update -> metrics"),
    "bad call (no component)": ("loop.learn.0", "update(buffer, obs) -> metrics"),
    "bad call (unbalanced)": ("loop.learn.0", "learner.update(buffer, obs -> metrics"),
    "bad call (space in target)": ("loop.learn.0", "learner .update(buffer, obs) -> metrics"),
    "bad call (literal argument)": ("loop.learn.0", "learner.update(buffer, 3) -> metrics"),
    "empty block": ("loop.learn", []),
    "block without do": ("loop.rollout.do", DELETE),
    "misspelt block key": ("loop.rollout.repat", 32),
    "repeat 0": ("loop.rollout.repeat", 0),
    "negative after": ("loop.rollout.after", -1),
    "bad block name": ("loop.Learn", ["learner.update(buffer, obs) -> metrics"]),
    "gradients partition at a block": ("partitions.gradients.at", "rollout"),
    "unknown policy": ("deploy", {"policy": "ring-allreduce"}),
    "zero workers": ("deploy", {"workers": 0}),
    "host without slots": ("deploy", {"hosts": ["host1"]}),
    "missing total_steps": ("train", {"seed": 1}),
    "zero total_steps": ("train.total_steps", 0),
    "window without mean_return": ("train.stop", {"window": 10}),
    "misspelt train key": ("train.eval", {"evry": 10}),
    "run_dir with ..": ("train.run_dir", "runs/../../etc"),
    "absolute run_dir": ("train.run_dir", "/tmp/runs"),
}


@pytest.mark.parametrize("path,value", list(INVALID.values()), ids=list(INVALID))
def test_invalid_variants(path: str, value: Any) -> None:
    assert errors_of(edit(base(), path, value)), "accepted, but should be rejected"


@pytest.mark.parametrize(
    "path,value,expected",
    [
        ("networks.pi.hiden", [64], "'hiden' was unexpected"),
        ("components.learner.gama", 0.9, "'gama' was unexpected"),
        ("components.buffer.lenght", 32, "'lenght' was unexpected"),
        ("networks.pi.kind", "lstm", "'lstm' is not one of"),
        ("components.learner.kind", "ppo2", "'ppo2' is not one of"),
        ("components.learner.gamma", 1.5, "1.5 is greater than the maximum of 1"),
    ],
)
def test_one_clear_error(path: str, value: Any, expected: str) -> None:
    """A misspelt field or a wrong kind gives exactly one error, naming the culprit."""
    errors = errors_of(edit(base(), path, value))
    assert len(errors) == 1, [e.message for e in errors]
    assert expected in errors[0].message
