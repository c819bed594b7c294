"""A network read by a policy and a value: one torso, one head per component, in generated code."""

from __future__ import annotations

import pytest

from rlgen.api import validate_text
from rlgen.codegen.build import BuildError, build, fdg_of
from rlgen.codegen.weights import network_heads
from rlgen.dsl.validate import validate_text as dsl_validate_text

from conftest import ROOT

A2C = (ROOT / "examples" / "a2c-cartpole.rl.yaml").read_text()
SHARED = A2C.replace("  v: {kind: mlp, hidden: [64, 64], activation: tanh}\n", "").replace(
    "critic: {kind: value, network: v}", "critic: {kind: value, network: pi}"
)


def test_shared_network_gets_a_policy_head_and_a_value_head():
    result = validate_text(SHARED)
    assert result.ok, [d.message for d in result.diagnostics]
    fdg, ctx = fdg_of(result)
    assert network_heads(ctx, "pi") == [("actor", 2, 0.01), ("critic", 1, 1.0)]
    agent = build(result).files["a2c_cartpole/agent.py"]
    assert "[2, 1],\n            output_gain=[0.01, 1.0]," in agent
    assert "outputs=(0, 2)" in agent and 'Value(self.pi, name="critic", output=2)' in agent


@pytest.mark.parametrize("policy", ["actors-learner", "multi-learner"])
def test_exchanged_weights_count_both_heads(policy):
    fdg, _ = fdg_of(validate_text(SHARED, policy=policy, workers=2))
    sizes = {p.name: p.shape[0] for t in fdg.transfers if t.value == "weights" for p in t.payload}
    assert sizes == {"pi": 4 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3}


def test_a_shared_custom_network_is_refused_by_validate_with_a_fix():
    """validate refuses what build cannot generate (E341), so the two agree; build refuses it too."""
    text = SHARED.replace(
        "  pi: {kind: mlp, hidden: [64, 64], activation: tanh}",
        '  pi: {kind: custom, impl: "custom_nets:ResidualMLP"}',
    )
    result = validate_text(text)
    (d,) = [d for d in result.diagnostics if d.severity == "error"]
    assert (d.code, d.json_path) == ("E341", "$.networks.pi.kind")
    assert "give each component its own network" in d.hint
    unchecked = dsl_validate_text(text)  # the language's checks alone: build still refuses it
    assert unchecked.ok
    with pytest.raises(BuildError, match="cannot carry one head per component"):
        build(unchecked)
