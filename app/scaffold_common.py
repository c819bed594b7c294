"""What both spec writers share (:mod:`rlgen.app.scaffold` for one agent,
:mod:`rlgen.app.scaffold_agents` for many): their error and how a value is written as YAML."""

from __future__ import annotations

import json
from typing import Any


class ScaffoldError(Exception):
    """The spec cannot be written for this algorithm and env (the message says why and what to do)."""


def flow(value: Any) -> str:
    """A value as YAML flow text: numbers, strings quoted as JSON, mappings and lists inline."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # exact; YAML reads an exponent as a float only after a dot
        mantissa, e, exponent = repr(value).partition("e")
        return f"{mantissa}{'' if '.' in mantissa else '.0'}e{exponent}" if e else mantissa
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)
