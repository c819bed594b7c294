"""The dataflow graph: nodes in loop order with placements, edges with dtypes and shapes; IR round-trips."""

from __future__ import annotations

import pytest

from rlgen.api import validate_file
from rlgen.codegen.graph import GraphError, build_graph
from rlgen.codegen.ir import Graph, from_json, to_json
from rlgen.dsl.envinfo import resolve_spaces

from conftest import EXAMPLES, ROOT


def graph_of(name: str, batch: int | None = None) -> Graph:
    result = validate_file(ROOT / "examples" / name)
    spaces, _ = resolve_spaces(result.spec.env)
    return build_graph(result.spec, result.flow, spaces, batch)


def test_ppo_nodes_in_loop_order_with_placements():
    g = graph_of("ppo-cartpole.rl.yaml")
    assert [(n.id, n.target, n.placement) for n in g.nodes] == [
        ("init.0", "env.reset", "env"),
        ("rollout.0", "actor.act", "compute"),
        ("rollout.1", "critic.value", "compute"),
        ("rollout.2", "env.step", "env"),
        ("rollout.3", "buffer.insert", "cpu"),
        ("learn.0", "learner.update", "compute"),
    ]
    assert g.node("rollout.2").path == "$.loop.rollout.do[2]"


def test_edges_carry_dtype_and_shape_with_the_batch():
    g = graph_of("ppo-cartpole.rl.yaml", batch=4)
    obs = g.edge("obs")
    assert (obs.parts[0].dtype, obs.parts[0].shape, obs.producer) == ("float32", (4, 4), "init.0")
    action = g.edge("action").parts[0]
    assert (action.dtype, action.shape) == ("int32", (4,))
    assert g.edge("next_obs").carried_to == "obs"
    buffer = g.edge("buffer")
    assert buffer.producer == "rollout.3" and buffer.consumers == ("learn.0",)
    assert buffer.parts[0].shape == (32, 4, 4) and buffer.parts[0].batch_axis == 1


def test_continuous_actions_are_float_vectors():
    g = graph_of("ppo-pendulum.rl.yaml")
    action = g.edge("action").parts[0]
    assert (action.dtype, action.shape) == ("float32", (4, 1))


def test_replay_buffer_and_sampled_batch_have_shapes():
    g = graph_of("dqn-cartpole.rl.yaml")
    assert g.edge("replay").consumers == ("learn.0",)
    assert g.edge("batch").parts[0].shape == (64, 4)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_graph_round_trips_through_json(example):
    g = graph_of(example.name)
    text = to_json(g)
    assert from_json(text, Graph) == g
    assert to_json(from_json(text, Graph)) == text


def test_unknown_spaces_are_refused():
    result = validate_file(ROOT / "examples" / "ppo-cartpole.rl.yaml")
    with pytest.raises(GraphError, match="declare them"):
        build_graph(result.spec, result.flow, None)
