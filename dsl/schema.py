"""The JSON Schema stage: validate plain data, and explain each failure in the user's terms."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from rlgen.dsl.calls import CallSyntaxError, parse_call
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error

SCHEMA_FILE = "rlgen.schema.json"
_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@functools.cache
def schema_text(name: str = SCHEMA_FILE) -> str:
    """The text of a schema of ``rlgen/schemas`` (the language's by default)."""
    return resources.files("rlgen.schemas").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def validator(name: str = SCHEMA_FILE) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_text(name)))


@functools.cache
def _strict_validator() -> jsonschema.protocols.Validator:
    """The schema's validator with ``integer`` meaning an ``int`` (JSON Schema also counts 20.0)."""
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    )
    strict = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    return strict(json.loads(schema_text()))


def integral(data: Any) -> Any:
    """``data`` (schema-valid) with every float that stands where the schema wants an
    integer made an ``int``: JSON Schema counts ``epochs: 20.0`` as an integer, so the
    spec accepts it, and the generated code gets ``20``."""

    def leaves(errors):
        for err in errors:
            yield err
            yield from leaves(err.context or ())

    for err in leaves(_strict_validator().iter_errors(data)):
        if err.validator == "type" and isinstance(err.instance, float) and err.instance.is_integer():
            *parents, last = err.absolute_path
            target = data
            for p in parents:
                target = target[p]
            target[last] = int(err.instance)
    return data


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_call_path(path: tuple) -> bool:
    return len(path) >= 3 and path[0] == "loop" and isinstance(path[-1], int)


def _leaves(err: ValidationError) -> Iterator[ValidationError]:
    """Flatten anyOf/oneOf into the most relevant alternative's errors."""
    if err.validator in ("anyOf", "oneOf") and err.context:
        best = best_match(err.context)
        siblings = [e for e in err.context if e.relative_schema_path[0] == best.relative_schema_path[0]]
        # A type mismatch against every alternative: report the whole thing as one error.
        if all(e.validator == "type" for e in err.context):
            yield err
            return
        for e in siblings:
            yield from _leaves(e)
    else:
        yield err


def _explain(err: ValidationError) -> Iterator[Finding]:
    path = tuple(err.absolute_path)
    v, inst, sch = err.validator, err.instance, err.schema
    if v == "additionalProperties" and isinstance(inst, dict):
        allowed = list(sch.get("properties", {}))
        for key in inst:
            if key not in allowed:
                yield error(
                    "E202",
                    (*path, key),
                    f"unknown key '{key}'{did_you_mean(key, allowed)}",
                    f"allowed here: {quote_list(allowed)}",
                    key=True,
                )
    elif v == "required":
        missing = err.validator_value
        for key in missing:
            if isinstance(inst, dict) and key not in inst:
                desc = sch.get("properties", {}).get(key, {}).get("description", "")
                yield error("E201", path, f"missing required key '{key}'", desc, key=bool(path))
    elif v == "enum":
        options = [str(o) for o in err.validator_value]
        yield error(
            "E203",
            path,
            f"{_describe(inst)} is not allowed here{did_you_mean(str(inst), options)}",
            f"one of: {', '.join(options)}",
        )
    elif v == "const":
        yield error(
            "E203",
            path,
            f"{_describe(inst)} is not allowed here; expected {_describe(err.validator_value)}",
            sch.get("description", ""),
        )
    elif v == "type" or (v in ("anyOf", "oneOf")):
        types = err.validator_value if v == "type" else [s.get("type") for s in err.validator_value]
        types = [t for t in (types if isinstance(types, list) else [types]) if t]
        expected = " or ".join(_TYPE_NAMES.get(t, t) for t in types) or "a different value"
        hint = sch.get("description", "")
        if isinstance(inst, str) and "number" in types:
            hint = "write numbers without quotes, e.g. 1.0e-3"
            zoo = re.fullmatch(r"\s*lin_([0-9.eE+-]+)\s*", inst)
            if zoo and "object" in types:  # the RL Zoo's linear schedule
                hint = f"the RL Zoo's {inst.strip()} is written {{schedule: linear, start: {zoo.group(1)}, end: 0.0}}"
        yield error("E204", path, f"expected {expected}, got {_describe(inst)}", hint)
    elif v == "pattern" and _is_call_path(path) and isinstance(inst, str):
        try:
            parse_call(inst)
        except CallSyntaxError as exc:
            yield error("E206", path, f"bad call: {exc.message}", exc.hint, offset=exc.offset)
        else:
            yield error(
                "E206",
                path,
                "bad call: names must be lowercase identifiers",
                "write component.method(arg, ...) -> out, ... with names like next_obs",
                offset=0,
            )
    elif v == "pattern" and "propertyNames" in err.schema_path:
        yield error(
            "E207",
            (*path, inst),
            f"'{inst}' is not a valid name",
            "names are lowercase letters, digits and '_', starting with a letter",
            key=True,
        )
    elif v in ("maxLength", "minLength") and isinstance(inst, str):
        how = "at most" if v == "maxLength" else "at least"
        what = sch.get("description", "").split(".")[0]
        message = f"{len(inst):,} characters here, {how} {err.validator_value:,} allowed" + (
            f" ({what})" if what else ""
        )
        yield error("E205", path, message, "shorten it" if v == "maxLength" else _examples_hint(sch))
    elif v in ("pattern", "maxLength", "minLength", "format"):
        hint = _examples_hint(sch)
        if v == "pattern" and isinstance(inst, str) and any(c in inst for c in "\n\r\u2028\u2029"):
            hint = "remove the line break (a quoted \\n, or the last newline of a block scalar: use |- or >-)"
        why = sch.get("description", _clip(err.message))
        yield error("E205", path, f"{_describe(inst)} is not valid here: {why}", hint)
    elif v in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "uniqueItems",
        "multipleOf",
        "minProperties",
        "maxProperties",
    ):
        hint = _examples_hint(sch) or sch.get("description", "")
        if path and path[-1] == "repeat" and inst == -1:  # Stable-Baselines3's gradient_steps: -1
            hint = (
                "SB3's gradient_steps: -1 (a gradient step per env step collected) is written as the number "
                "itself: the env steps an iteration collects, the collecting block's repeat x env.num_envs "
                "(docs/language.md, `repeat`)"
            )
        yield error("E208", path, _bound_message(err), hint)
    elif v == "not":
        why = err.validator_value.get("description", "") if isinstance(err.validator_value, dict) else ""
        message = f"{_describe(inst)} is not allowed here" + (f": {why}" if why else "")
        hint = f"choose another name, e.g. '{inst}_'" if isinstance(inst, str) else sch.get("description", "")
        if "propertyNames" in err.schema_path:
            yield error("E207", (*path, inst), message, hint, key=True)
        else:
            yield error("E209", path, message, hint)
    else:
        yield error("E200", path, _clip(err.message), sch.get("description", ""))


def _clip(text: str, width: int = 200) -> str:
    """A message that quotes the instance, cut short (the instance may be a whole section)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _bound_message(err: ValidationError) -> str:
    """What a size or range keyword refused, without quoting a large instance."""
    v, bound, inst = err.validator, err.validator_value, err.instance
    sized = {"minItems": ("items", "at least"), "maxItems": ("items", "at most")}
    sized |= {"minProperties": ("entries", "at least"), "maxProperties": ("entries", "at most")}
    if v in sized and isinstance(inst, list | dict):
        what, how = sized[v]
        return f"{len(inst)} {what} here, {how} {bound} allowed"
    ranges = {"minimum": "less than the minimum of", "maximum": "greater than the maximum of"}
    ranges |= {"exclusiveMinimum": "not greater than", "exclusiveMaximum": "not less than"}
    if v in ranges:
        return f"{_describe(inst)} is {ranges[v]} {bound}"
    return _clip(err.message)


def _examples_hint(schema: dict[str, Any]) -> str:
    examples = schema.get("examples") or []
    return f"for example: {json.dumps(examples[0])}" if examples else ""


def check_schema(data: Any, schema: str = SCHEMA_FILE) -> list[Finding]:
    """All errors of ``data`` against a schema of ``rlgen/schemas`` (the language's by
    default), explained; empty when it conforms."""
    findings: list[Finding] = []
    seen: set[tuple] = set()
    errors = sorted(validator(schema).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    for top in errors:
        for leaf in _leaves(top):
            for f in _explain(leaf):
                key = (f.code, f.path, f.message)
                if key not in seen:
                    seen.add(key)
                    findings.append(f)
    return findings
