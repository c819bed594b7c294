"""A seeded mutation fuzzer over the examples: bad input never crashes validate, and whatever
validates also builds, compiles and imports.

Each mutant is an example with one to three random edits: a name renamed everywhere (to a
keyword, a builtin, a module, a name generated code uses, an odd or long name), a number
changed (to 0, -1, 20.0, 10**30, ...), a value of another type, a key dropped, the policy
or the env switched, or the text itself edited (a YAML 1.1 scalar, a control character,
deep brackets, a line deleted or repeated). The properties:

* ``validate`` never raises, whatever the input (the CLI's exit 3 is a bug), and takes
  at most a few seconds;
* a mutant that validates builds under every policy it validates for (each policy with its
  own minimum of workers, one with 3), every generated ``.py`` compiles, uses only the spec's
  names and those generated code keeps (see test_generated_names), and shadows nothing;
* a sample of the builds is imported (with TensorFlow, in one subprocess).

The seed is fixed, so a failure reproduces; the message shows the mutant's edits.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import yaml
from buildcases import CASE_LIST
from generated_names import collisions, renamed, shadowed, spec_names, unexplained

from rlgen.api import validate_text
from rlgen.codegen.build import build, render_build
from rlgen.codegen.names import package_name
from rlgen.codegen.policies import POLICIES
from rlgen.dsl.yamlload import load_yaml

from conftest import EXAMPLES, ROOT

SEED = 20261124
MUTANTS = 264  # 40+ valid ones, and a build under every policy (the first under agent-groups is mutant 255)
#: Most seconds one mutant may take to validate (or to validate and build, per policy).
SLOW = 5.0

NAMES = (
    # keywords, soft keywords, builtins, modules
    "class", "lambda", "import", "not", "match", "type", "len", "print", "list", "range", "super",
    "numpy", "enum", "os", "sys", "rlgen", "gymnasium", "tensorflow", "yaml", "test",
    # what generated code uses
    "self", "clock", "session", "rank", "progress", "iteration", "np", "tf", "comm", "parts", "t",
    "seed", "args", "main", "error", "size", "agent", "actor", "learner", "worker", "env_worker",
    "name", "variables", "weights", "carried", "drain_episodes", "trainable_variables",
    "send_obs", "recv_obs", "sync_weights", "rollout_actor_act", "buffer_rows", "rollout_step", "t_2",
    "buffer_obs", "buffer_actions", "replay_reward", "batch_obs", "batch_next_obs",
    # odd but fine, and not names at all
    "stats", "metrics", "obs2", "a", "x" * 64, "x" * 65, "__init__", "_x", "Obs", "1x", "a-b", "a.b",
    "a b", "é", "",
)  # fmt: skip
SPEC_NAMES = ("numpy", "enum", "gymnasium", "rlgen", "test", "os", "print", "class", "main", "agent", "my-run", "a")
NUMBERS = (0, 1, -1, 2, 3, 7, 20.0, 0.5, 1e-3, 1e9, 10**30, 2**63, -(2**31), 1e308, 4096)
SCALARS = ("yes", "on", "1:30", "0o17", "2024-01-01", ".nan", ".inf", "!!bool maybe", "~", "''", "[]", "{}", "1e3")
_FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ENV_IDS = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCarContinuous-v0", "Taxi-v3", "Nope-v0")


def _paths(data, path=()) -> Iterator[tuple]:
    yield path
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, (*path, i))


def _get(data, path):
    for p in path:
        data = data[p]
    return data


def _set(data, path, value):
    _get(data, path[:-1])[path[-1]] = value


def _identifiers(text: str) -> list[str]:
    """Names a spec defines: keys of networks/components/loop/partitions and call outputs."""
    out = set(re.findall(r"->\s*([a-z_][a-z0-9_]*(?:\s*,\s*[a-z_][a-z0-9_]*)*)", text))
    names = {n.strip() for group in out for n in group.split(",")}
    names |= set(re.findall(r"^  ([a-z_][a-z0-9_]*):", text, re.M))
    return sorted(names - {"id", "num_envs", "policy", "workers", "total_steps", "seed", "init"})


def mutate(rng: random.Random, text: str) -> tuple[str, str]:
    """One random edit of a spec's text: (what was done, new text)."""
    op = rng.choice(("rename", "rename", "spec_name", "number", "number", "retype", "drop", "deploy", "env", "text"))
    if op == "rename":
        old, new = rng.choice(_identifiers(text)), rng.choice(NAMES)
        return f"rename {old} -> {new!r}", re.sub(rf"\b{re.escape(old)}\b", new, text)
    if op == "spec_name":
        new = rng.choice(SPEC_NAMES)
        return f"name: {new}", re.sub(r"^name: .*$", f"name: {new}", text, count=1, flags=re.M)
    if op == "text":
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines))
        kind = rng.choice(("scalar", "char", "delete", "repeat", "brackets"))
        if kind == "scalar" and re.search(r": [^\s{\[][^#\n]*", lines[i]):
            s = rng.choice(SCALARS)
            lines[i] = re.sub(r"(: )[^\s{\[#][^#\n,}]*", lambda m: m.group(1) + s, lines[i], count=1)
        elif kind == "char":
            at = rng.randrange(len(lines[i]) + 1)
            lines[i] = (
                lines[i][:at] + rng.choice("\x00\x07\x1b\t\u2028\ufeff\x85'\"&*!%@`|>:#[]{},-?\\") + lines[i][at:]
            )
        elif kind == "delete":
            del lines[i]
        elif kind == "repeat":
            lines.insert(i, lines[i])
        else:
            depth = rng.choice((10, 60, 700))
            lines.append(f"x-deep: {'[' * depth}{']' * depth}\n")
        return f"text {kind} at line {i + 1}", "".join(lines)
    data = yaml.load(text, Loader=_FAST)  # noqa: S506 - a safe loader (libyaml's, where installed)
    paths = list(_paths(data))[1:]
    if op == "number":
        leaves = [p for p in paths if isinstance(_get(data, p), int | float) and not isinstance(_get(data, p), bool)]
        p = rng.choice(leaves)
        v = _get(data, p)
        new = rng.choice((*NUMBERS, v * 2, v // 2 if isinstance(v, int) else v / 2, float(v), v + 1))
        _set(data, p, new)
        desc = f"{'.'.join(map(str, p))} = {new!r}"
    elif op == "retype":
        p = rng.choice(paths)
        new = rng.choice((None, True, "x", 3, [1], {"a": 1}, [], {}, "env.step(action)"))
        _set(data, p, new)
        desc = f"{'.'.join(map(str, p))} = {new!r}"
    elif op == "drop":
        p = rng.choice([p for p in paths if isinstance(p[-1], str)])
        del _get(data, p[:-1])[p[-1]]
        desc = f"drop {'.'.join(map(str, p))}"
    elif op == "deploy":
        data["deploy"] = {"policy": rng.choice(list(POLICIES)), "workers": rng.choice((1, 2, 3, 4, 8))}
        desc = f"deploy {data['deploy']}"
    else:
        data["env"]["id"] = rng.choice(ENV_IDS)
        if rng.random() < 0.3:
            data["env"]["backend"] = rng.choice(("tensorflow", "gymnasium"))
        desc = f"env {data['env']}"
    return desc, yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def mutants() -> Iterator[tuple[str, str]]:
    rng = random.Random(SEED)
    texts = [p.read_text(encoding="utf-8") for p in EXAMPLES]
    for i in range(MUTANTS):
        text = texts[i % len(texts)]
        edits = [EXAMPLES[i % len(texts)].name]
        for _ in range(rng.choice((1, 1, 2, 3))):
            try:
                desc, text = mutate(rng, text)
            except (yaml.YAMLError, ValueError, IndexError, KeyError, TypeError, AttributeError, RecursionError):
                break  # the text no longer parses as plain YAML: keep it as it is
            edits.append(desc)
        yield "; ".join(edits), text


def _policies_of(rng: random.Random) -> Iterator[tuple[str, int | None]]:
    """Every policy with its minimum of workers, and one distributed policy with 3."""
    yield from ((policy, None) for policy in POLICIES)
    yield rng.choice([p for p in POLICIES if p != "single"]), 3


def _timed(fn, *args, **kw):
    start = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - start


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> dict:
    """Validate every mutant, and build every valid one under every policy it validates for."""
    rng = random.Random(SEED)
    crashes, slow, broken = [], [], []
    built: list = []
    valid = 0
    for desc, text in mutants():
        try:
            result, took = _timed(validate_text, text, "mutant.rl.yaml")
        except Exception as exc:  # noqa: BLE001 - the property: nothing escapes validate
            crashes.append(f"{desc}: {type(exc).__name__}: {exc}")
            continue
        if took > SLOW:
            slow.append(f"{desc}: validate took {took:.1f} s")
        if not result.ok:
            continue
        valid += 1
        for policy, workers in _policies_of(rng):
            try:
                res = validate_text(text, "mutant.rl.yaml", policy=policy, workers=workers)
                if not res.ok:
                    continue
                out, took = _timed(render_build, res, "mutant.rl.yaml")
            except Exception as exc:  # noqa: BLE001 - the property: what validates, builds
                broken.append(f"{desc} [{policy} x{workers}]: {type(exc).__name__}: {exc}")
                continue
            if took > SLOW:
                slow.append(f"{desc} [{policy}]: build took {took:.1f} s")
            built.append((desc, policy, res, out.files, text, workers))
    return {"crashes": crashes, "slow": slow, "broken": broken, "built": built, "valid": valid}


def test_the_fuzzer_makes_enough_valid_and_invalid_mutants(fuzzed):
    assert fuzzed["valid"] >= 40, fuzzed["valid"]
    assert MUTANTS - fuzzed["valid"] >= 100
    assert len(fuzzed["built"]) >= 80
    # every policy some example builds under (agent-groups: mappo-simple-tag, with groups and an env partition)
    assert {b[1] for b in fuzzed["built"]} == {policy for _, policy, _ in CASE_LIST}


def test_validate_never_raises_and_is_fast(fuzzed):
    assert fuzzed["crashes"] == []
    assert fuzzed["slow"] == []


def test_what_validates_builds_under_every_policy_it_validates_for(fuzzed):
    assert fuzzed["broken"] == []


def test_every_generated_module_compiles_and_keeps_to_its_names(fuzzed):
    problems = []
    seen = set()
    for desc, policy, result, files, spec_text, workers in fuzzed["built"]:
        for rel, text in files.items():
            if rel.endswith(".py"):
                try:
                    compile(text, rel, "exec")
                except SyntaxError as exc:
                    problems.append(f"{desc} [{policy}] {rel}: {exc}")
        # names depend on the spec's names and structure, not on its numbers: check each shape once
        shape = (policy, frozenset(spec_names(result.spec)), tuple(sorted(files)), result.spec.env.backend)
        if shape in seen:
            continue
        seen.add(shape)
        if bad := unexplained(files, result.spec):
            problems.append(f"{desc} [{policy}]: names neither the spec's nor listed: {bad}")
        if bad := shadowed(files):
            problems.append(f"{desc} [{policy}]: locals shadow module names: {bad}")
        alpha = renamed(load_yaml(spec_text)[0], result.spec)
        again = validate_text(yaml.safe_dump(alpha, sort_keys=False), "alpha.rl.yaml", policy=policy, workers=workers)
        if not again.ok:
            problems.append(f"{desc} [{policy}]: renamed, it does not validate: {again.diagnostics[0].message}")
        elif bad := collisions(files, render_build(again, "mutant.rl.yaml").files):
            problems.append(f"{desc} [{policy}]: a spec name merges with generated code's: {bad[:3]}")
    assert problems == []


def test_a_sample_of_builds_imports(fuzzed, tmp_path):
    """Import every module of one build per distinct spec name and policy (TensorFlow is loaded
    once, in a subprocess): what compiles must also import."""
    sample: dict[tuple, tuple] = {}
    for desc, policy, result, *_ in fuzzed["built"]:
        sample.setdefault((result.spec.name, policy), (desc, result))
    dirs = []
    for i, (desc, result) in enumerate(list(sample.values())[:8]):
        out = tmp_path / f"b{i}"
        build(result, out)  # formatted, as written by `rlgen build`
        dirs.append({"dir": str(out), "package": package_name(result.spec.name), "what": desc})
    code = r"""
import importlib, json, sys
failed = []
for case in json.loads(sys.argv[1]):
    sys.path.insert(0, case["dir"])
    try:
        for module in ("main",):
            importlib.import_module(case["package"] + "." + module)  # main imports every fragment
    except Exception as exc:
        failed.append(f"{case['what']}: {type(exc).__name__}: {exc}")
    finally:
        sys.path.remove(case["dir"])
        for name in [m for m in sys.modules if m == case["package"] or m.startswith(case["package"] + ".")]:
            del sys.modules[name]
print(json.dumps(failed))
"""
    env = {"PYTHONPATH": str(ROOT.parent)}
    r = subprocess.run(
        [sys.executable, "-c", code, json.dumps(dirs)], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
