"""Parsing loop calls, with offsets for precise error columns."""

from __future__ import annotations

import pytest

from rlgen.dsl.calls import CallSyntaxError, parse_call


def test_parse_full_call_with_offsets():
    c = parse_call("env.step(action) -> next_obs, reward, terminated, truncated")
    assert (c.component, c.method) == ("env", "step")
    assert [a.text for a in c.args] == ["action"]
    assert [o.text for o in c.outputs] == ["next_obs", "reward", "terminated", "truncated"]
    assert c.text[c.args[0].offset :].startswith("action")
    assert c.text[c.outputs[2].offset :].startswith("terminated")
    assert str(c) == "env.step(action) -> next_obs, reward, terminated, truncated"


def test_no_args_no_outputs_and_spacing():
    c = parse_call("  learner . sync_target ( )  ")
    assert c.target == "learner.sync_target" and c.args == () and c.outputs == ()


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("env.reset -> obs", "parentheses", 16),
        ("reset() -> obs", "component and a method", 0),
        ("actor.act(obs -> a", "unbalanced", 9),
        ("actor.act(obs, 3x) -> a", "not a name", 15),
        ("actor.act(obs) -> a, ", "stray comma", 20),
        ("actor.act(obs) ->", "must be followed", 16),
    ],
)
def test_syntax_errors_point_into_the_string(text, message, offset):
    with pytest.raises(CallSyntaxError) as exc:
        parse_call(text)
    assert message in exc.value.message
    assert exc.value.offset == offset
