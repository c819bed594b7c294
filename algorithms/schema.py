"""The schema's learner definitions and the language reference's learner settings,
generated from the homes' settings dataclasses.

``schemas/rlgen.schema.json`` is the published schema (editors read it). Its
``<kind>_component`` definitions, the component kinds it lists and the rules
selecting a definition by kind are written from :data:`rlgen.algorithms.ALGORITHMS`,
and so is the section of ``docs/language.md`` between the ``learners`` markers;
tests keep both equal to what this module writes. After changing a home::

    python -m rlgen.algorithms.schema        # rewrites both
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.algorithms.base import IDENTIFIER, Algorithm, default_of, spec_fields

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schemas" / "rlgen.schema.json"
LANGUAGE = ROOT / "docs" / "language.md"
BEGIN = "<!-- learners: written by python -m rlgen.algorithms.schema from the homes; do not edit -->"
END = "<!-- /learners -->"
#: Component kinds that are not learners, in the schema's order (before and after them).
BUILDING_BLOCKS = ("policy", "value", "qvalue", "rollout", "replay")
LAST = ("custom",)


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def definition(algo: Algorithm) -> dict[str, Any]:
    """The ``<kind>_component`` definition of a learner kind."""
    methods = "method" if len(algo.methods) == 1 else "methods"
    noun = algo.title.split(" (")[0]  # "A PPO learner"
    props: dict[str, Any] = {
        "kind": {"description": f"Selects {noun[0].lower()}{noun[1:]}.", "const": algo.kind, "examples": [algo.kind]},
    }
    for ref in (*algo.refs, *algo.networks):
        props[ref.field] = {"description": ref.doc, **IDENTIFIER, "examples": [ref.example]}
    for f in spec_fields(algo.config):
        default = _plain(default_of(f))
        props[f.name] = {
            "description": f.metadata["doc"],
            **f.metadata["schema"],
            "default": default,
            "examples": [default, *(_plain(e) for e in f.metadata["examples"])],
        }
    return {
        "description": f"{algo.title}; {methods} {algo.signature()}.",
        "type": "object",
        "properties": props,
        "required": ["kind", *(r.field for r in (*algo.refs, *algo.networks))],
        "additionalProperties": False,
        "examples": [_plain(algo.example)],
    }


def _selector(kind: str) -> dict[str, Any]:
    return {
        "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
        "then": {"$ref": f"#/$defs/{kind}_component"},
    }


def generate(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its learner definitions, kind list and kind selectors written from the homes."""
    out = copy.deepcopy(schema)
    defs = out["$defs"]
    kinds = [*BUILDING_BLOCKS, *ALGORITHMS, *LAST]
    component = defs["component"]
    component["properties"]["kind"]["enum"] = kinds
    component["properties"]["kind"]["description"] = f"The component kind: {', '.join(kinds[:-1])} or {kinds[-1]}."
    component["allOf"] = [_selector(k) for k in kinds]
    learner_defs = {f"{kind}_component": definition(algo) for kind, algo in ALGORITHMS.items()}
    ordered: dict[str, Any] = {}
    for name, value in defs.items():  # learners where the first of them was, the rest kept in place
        if name.endswith("_component") and name.split("_component")[0] not in (*BUILDING_BLOCKS, *LAST, ""):
            if not any(k in ordered for k in learner_defs):
                ordered.update(learner_defs)
            continue
        ordered[name] = value
    for name, value in learner_defs.items():
        ordered.setdefault(name, value)
    out["$defs"] = ordered
    return out


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value
    return "null" if value is None else json.dumps(value)


def settings_table(algo: Algorithm) -> str:
    """The markdown table of a learner kind's settings: name, default, meaning."""
    rows = [f"| `{r.field}` | required | {r.doc} |" for r in (*algo.refs, *algo.networks)]
    for f in spec_fields(algo.config):
        rows.append(f"| `{f.name}` | `{_shown(_plain(default_of(f)))}` | {f.metadata['doc']} |")
    return "\n".join(["| setting | default | meaning |", "|---|---|---|", *rows])


def learners_section() -> str:
    """The learner settings of ``docs/language.md``, one table per home."""
    parts = [BEGIN]
    for kind, algo in ALGORITHMS.items():
        methods = ", ".join(f"`{m}`" for m in algo.signature().split(" and "))
        parts += [f"#### `{kind}`: {algo.title[0].lower()}{algo.title[1:]}", "", f"Methods: {methods}.", ""]
        parts += [settings_table(algo), ""]
    return "\n".join([*parts, END])


def with_learners(doc: str) -> str:
    """``doc`` with its learners section written from the homes."""
    start, stop = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + learners_section() + doc[stop:]


def _write(path: Path, new: str) -> None:
    if new == path.read_text(encoding="utf-8"):
        print(f"{path.name} is up to date")
    else:
        path.write_text(new, encoding="utf-8")
        print(f"wrote {path}")


def main() -> int:
    _write(SCHEMA, text(generate(json.loads(SCHEMA.read_text(encoding="utf-8")))))
    _write(LANGUAGE, with_learners(LANGUAGE.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
