"""The JSON Schema alone (as editors and CI use it) and `rlgen validate` agree.

Editors read YAML 1.2 and apply the schema's ``pattern``s as ECMA-262 regular expressions,
as JSON Schema specifies; Python's ``re`` differs (``$`` also matches before a final line
break, ``.`` matches ``\\r``). So:

* every schema pattern gives the same verdict under Python's ``re`` and under ECMA-262
  semantics, on strings chosen to tell the two apart;
* for every corpus file and example that loads as YAML, the schema alone (ECMA patterns)
  refuses it exactly when ``rlgen validate`` reports a schema error (E2xx), and where the
  schema accepts it validate reports only semantic errors. (The loader's YAML 1.2 reading
  is tested against the core schema's table in test_yamlload.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import jsonschema
import pytest
from jsonschema.exceptions import ValidationError

from rlgen.api import validate_text
from rlgen.dsl.diagnostics import Severity
from rlgen.dsl.yamlload import YamlError, load_yaml

from conftest import EXAMPLES, ROOT

SCHEMA = json.loads((ROOT / "schemas" / "rlgen.schema.json").read_text(encoding="utf-8"))
CORPUS = sorted((ROOT / "tests" / "corpus" / "invalid").glob("*.rl.yaml"))
_ECMA_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_SHORT = {"d": ("[0-9]", "0-9"), "w": ("[A-Za-z0-9_]", "A-Za-z0-9_"), "s": (f"[{_ECMA_SPACE}]", _ECMA_SPACE)}


def ecma(pattern: str) -> str:
    """A Python regex that matches as the ECMA-262 (non-unicode, non-multiline) ``pattern`` does."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in _SHORT:
                out.append(_SHORT[nxt][1] if in_class else _SHORT[nxt][0])
            elif nxt in "DWS" and not in_class:
                out.append("[^" + _SHORT[nxt.lower()][1] + "]")
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
        elif c == "$":
            out.append(r"(?![\s\S])")  # the very end, never before a final line break
        elif c == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _patterns(node) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern":
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


PATTERNS = sorted(set(_patterns(SCHEMA)))
PROBES = [
    "actor",
    "actor\n",
    "actor\r",
    "a\nb",
    "\nactor",
    "ppo-cartpole",
    "ppo-cartpole\n",
    "runs",
    "runs\n",
    "runs\r\n",
    "ru\u2028ns",
    "ru\x85ns",
    "experiments/cartpole",
    "../up",
    "a/../b",
    "..\n",
    "/abs",
    "C:x",
    "CartPole-v1",
    "CartPole-v1\n",
    "my_pkg.nets:ConvTorso",
    "my_pkg.nets:ConvTorso\n",
    "host1:2",
    "host1:1024",
    "host1:1025",
    "host1:2\n",
    "env.step",
    "env.step\n",
    "actor.act(obs) -> action, logp",
    "actor.act(obs) -> action, logp\n",
    " actor.act( obs )->action ",
    "actor.act(obs)\u00a0-> action",
    "actor.act(obs)\x85-> action",
    "actor.act(obs)\u2028-> action",
    "x٣",
    "x\u00e9",
    "",
]


def test_the_translation_tells_the_dialects_apart():
    """A check that can fail: where Python and ECMA differ, ``ecma`` follows ECMA."""
    assert re.search("^a$", "a\n") and not re.search(ecma("^a$"), "a\n")
    assert re.search("^.$", "\r") and not re.search(ecma("^.$"), "\r")
    assert re.search(r"^\d$", "٣") and not re.search(ecma(r"^\d$"), "٣")
    assert re.search(r"^\s$", "\x85") and not re.search(ecma(r"^\s$"), "\x85")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_schema_pattern_means_the_same_in_python_and_ecma_262(pattern):
    differ = [p for p in PROBES if bool(re.search(pattern, p)) != bool(re.search(ecma(pattern), p))]
    assert differ == [], f"{pattern!r} reads differently on {differ!r}"


def _ecma_pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not re.search(ecma(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


EditorValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, validators={"pattern": _ecma_pattern})


def _documents() -> Iterator[tuple[str, str]]:
    for path in [*CORPUS, *EXAMPLES]:
        yield path.name, path.read_text(encoding="utf-8")
    base = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text(encoding="utf-8")
    for old, new in [
        ("deterministic: true", "deterministic: yes"),
        ("deterministic: true", "deterministic: on"),
        ("epochs: 20 ", "epochs: 1:30 "),
        ("epochs: 20 ", "epochs: 20.0 "),
        ("name: ppo-cartpole", "description2: x\nname: ppo-cartpole"),
        ("description: PPO", "description: 0o17 #"),
        ("description: PPO", "description: 2024-01-01 #"),
        ("name: ppo-cartpole", 'name: "ppo-cartpole\\n"'),
        ("seed: 0", 'seed: 0\n  run_dir: "runs\\n"'),
        ("seed: 0", 'seed: 0\n  run_dir: "ru\\rns"'),
        ("receive: [weights]", "receive: [5]"),
        ("reduce: [gradients]", "reduce: [weights]"),
        ("policy: single ", "policy: single\n  workers: 100000000\n "),
        ("  actor: {kind", "  class: {kind"),
    ]:
        assert old in base, old
        yield f"ppo-cartpole with {new!r}", base.replace(old, new, 1)


@pytest.mark.parametrize(("name", "text"), list(_documents()), ids=[n for n, _ in _documents()])
def test_the_schema_alone_and_validate_agree(name, text):
    try:
        data, _ = load_yaml(text, name)
    except YamlError:
        pytest.skip("not YAML data: no schema applies (E1xx)")
    schema_errors = list(EditorValidator(SCHEMA).iter_errors(data))
    result = validate_text(text, name)
    errors = [d.code for d in result.diagnostics if d.severity is Severity.ERROR]
    schema_codes = [c for c in errors if c.startswith("E2")]
    assert bool(schema_errors) == bool(schema_codes), (
        f"schema alone: {[e.message for e in schema_errors][:3]}; validate: {errors}"
    )
