"""What a home declares about its algorithm, and the typed settings it is configured with.

An algorithm's home (``rlgen/algorithms/<kind>/``, Acme's agent folder) holds:

* ``config.py``: one dataclass of its settings, each a :func:`setting` with its
  default, its documentation and its JSON Schema constraints, so the default and
  the meaning live in one place (the schema's ``<kind>_component`` is generated
  from it: :mod:`rlgen.algorithms.schema`);
* ``__init__.py``: its :class:`Algorithm`: the methods the loop may call, the
  components it refers to, its metric names, how codegen lowers it, its template
  part. This half never imports TensorFlow, so ``rlgen validate`` stays light;
* ``learner.py``: its TensorFlow learner (imported only by generated code);
* ``fragment.j2``: its part of a compute fragment (imports, construction, calls).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlgen.dsl.methods import Method

# JSON Schema pieces for settings (the $defs they name are in schemas/rlgen.schema.json).
RATE = {"$ref": "#/$defs/rate"}
OPTIMIZER = {"$ref": "#/$defs/optimizer"}
IDENTIFIER = {"$ref": "#/$defs/identifier"}
FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
NON_NEGATIVE = {"type": "number", "minimum": 0}
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
BOOLEAN = {"type": "boolean"}


def setting(default: Any, doc: str, schema: Mapping[str, Any], examples: tuple = (), spec: bool = True) -> Any:
    """A settings field: its default, what it means, its JSON Schema constraints and
    examples (the default comes first in the schema's examples). ``spec=False``: a
    runtime-only knob a spec cannot set."""
    meta = {"doc": doc, "schema": dict(schema), "examples": tuple(examples), "spec": spec}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def spec_fields(config: type) -> tuple[dataclasses.Field, ...]:
    """The fields of a settings dataclass that a spec may set."""
    return tuple(f for f in dataclasses.fields(config) if f.metadata.get("spec", True))


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def from_settings(config: type, settings: Mapping[str, Any]) -> Any:
    """``config(**known settings)``: keys it does not have (``kind``, references) are ignored."""
    names = {f.name for f in dataclasses.fields(config)}
    return config(**{k: v for k, v in settings.items() if k in names})


@dataclass(frozen=True)
class Ref:
    """A setting that names another component: the field, the kinds it accepts, its meaning."""

    field: str
    kinds: frozenset[str]
    doc: str
    example: str


#: ``lower(k, name) -> options``: codegen's view of one component of this kind (``k`` is
#: :class:`rlgen.codegen.lower.components.KindContext`; typed by duck, so a home never
#: imports codegen).
Lowering = Callable[[Any, str], dict[str, Any]]


@dataclass(frozen=True)
class Algorithm:
    """Everything the language, codegen and the runtime need to know about one learner kind."""

    kind: str
    #: The schema's description of the component (first sentence; the methods are added).
    title: str
    #: The settings dataclass (``config.py``); also the learner's runtime config.
    config: type
    #: Settings that name other components (the policy, value or Q-function it trains).
    refs: tuple[Ref, ...]
    methods: Mapping[str, Method]
    #: Names of the entries of the metrics vector its update returns, in order.
    metrics: tuple[str, ...]
    lower: Lowering
    #: The reference whose component acts: exported as the trained policy and evaluated.
    acts: str
    #: That component becomes a policy through ``.policy()`` (a Q-network), not as is.
    acts_through_policy: bool = False
    #: The buffer kind its update reads whole (on-policy); None: it samples batches.
    buffer: str | None = None
    #: Buffer fields its update needs to have been inserted.
    needs_inserted: tuple[str, ...] = ()
    #: Its calls have an in-graph form (the whole iteration can be one compiled graph).
    in_graph: bool = False
    #: It only fits discrete action spaces.
    discrete_actions: bool = False
    #: Its learner draws random numbers (minibatch shuffles): it gets the replica's seed.
    seeded: bool = False
    #: Settings that name a network the learner builds itself (e.g. SAC's critics);
    #: ``kinds`` is empty for these.
    networks: tuple[Ref, ...] = ()
    #: The distribution the acting policy (``acts``) must have, if one.
    actor_distribution: str | None = None
    #: The names its template part imports into generated code (spec names may not use them).
    names: tuple[str, ...] = ()
    #: A schema example of the component.
    example: Mapping[str, Any] = field(default_factory=dict)

    @property
    def template(self) -> str:
        """Its template part, relative to ``rlgen/algorithms``."""
        return f"{self.kind}/fragment.j2"

    def defaults(self) -> dict[str, Any]:
        """The spec settings' defaults, as plain data."""
        return {f.name: default_of(f) for f in spec_fields(self.config)}

    def has_setting(self, name: str) -> bool:
        return any(f.name == name for f in spec_fields(self.config))

    def rates(self) -> frozenset[str]:
        """Settings that are a number or a schedule over training progress."""
        return frozenset(f.name for f in spec_fields(self.config) if f.metadata["schema"] == RATE)

    def settings_of(self, plain: Mapping[str, Any]) -> dict[str, Any]:
        """The spec settings of a resolved component (plain data): what ``config`` takes."""
        return {f.name: plain[f.name] for f in spec_fields(self.config) if f.name in plain}

    def signature(self) -> str:
        """``update(buffer, obs) -> metrics``: its methods as the schema describes them."""

        def one(m: Method) -> str:
            outs = ", ".join(p.name for p in m.outputs)
            return f"{m.name}({', '.join(p.name for p in m.inputs)})" + (f" -> {outs}" if outs else "")

        return " and ".join(one(m) for m in self.methods.values())
