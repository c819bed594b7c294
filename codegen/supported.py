"""What ``rlgen build`` generates code for, checked by ``rlgen validate`` (so the two agree)."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.codegen.lower.components import LOWER
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.diagnostics import quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.spec import Spec

#: Component kinds ``rlgen build`` generates code for: those with a lowering.
SUPPORTED_KINDS = frozenset(LOWER)


def check_supported(spec: Spec, flow: Dataflow) -> Iterator[Finding]:
    """Every component the loop calls has a code generator, and only MLP networks are shared.

    ```yaml
    components:
      learner: {kind: custom, impl: "my.mod:Vtrace", methods: {update: {inputs: [buffer]}}}  # E340
    networks:
      enc: {kind: custom, impl: "my.mod:Torso"}
    components:
      actor: {kind: policy, network: enc}
      critic: {kind: value, network: enc}      # E341: a custom network has one output
    ```
    """
    called = dict.fromkeys(c.call.call.component for c in flow.calls if c.kind != "env")
    for name in called:
        kind = spec.components[name].kind
        if kind not in SUPPORTED_KINDS:
            yield error(
                "E340",
                ("components", name, "kind"),
                f"rlgen build does not generate code for component kind '{kind}' yet",
                f"use the built-in kinds ({quote_list(SUPPORTED_KINDS)}); custom components can be declared "
                "and validated, but not built or run",
            )
    for net_name, net in spec.networks.items():
        readers = spec.readers(net_name)
        if net.kind == "custom" and len(readers) > 1:
            yield error(
                "E341",
                ("networks", net_name, "kind"),
                f"network '{net_name}' is custom (kind: {net.kind}) and read by {quote_list(readers)}: a custom "
                "network has one output, so it cannot carry one head per component",
                "give each component its own network, or use kind: mlp, cnn or impala (which share their torso "
                "and add one head per component)",
            )
