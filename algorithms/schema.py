"""The schema's learner definitions, generated from the homes' settings dataclasses.

``schemas/rlgen.schema.json`` is the published schema (editors read it). Its
``<kind>_component`` definitions, the component kinds it lists and the rules
selecting a definition by kind are written from :data:`rlgen.algorithms.ALGORITHMS`;
a test keeps the file equal to what this module writes. After changing a home::

    python -m rlgen.algorithms.schema        # rewrites schemas/rlgen.schema.json
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.algorithms.base import IDENTIFIER, Algorithm, default_of, spec_fields

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "rlgen.schema.json"
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
    for ref in algo.refs:
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
        "required": ["kind", *(r.field for r in algo.refs)],
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


def main() -> int:
    current = json.loads(SCHEMA.read_text(encoding="utf-8"))
    new = text(generate(current))
    if new == SCHEMA.read_text(encoding="utf-8"):
        print(f"{SCHEMA.name} is up to date")
        return 0
    SCHEMA.write_text(new, encoding="utf-8")
    print(f"wrote {SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
