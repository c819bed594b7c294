"""Safety of rendering: spec data reaches code only as identifiers or literals; hostile input is inert."""

from __future__ import annotations

import ast
import math

import jinja2
import pytest

from rlgen.api import validate_text
from rlgen.codegen.build import BuildError, build, write_tree
from rlgen.codegen.render import RenderError, comment, comment_lines, environment, ident, literal

from conftest import ROOT

PPO_TEXT = (ROOT / "examples" / "ppo-cartpole.rl.yaml").read_text()


@pytest.mark.parametrize(
    "value",
    [
        "a'b",
        'a"b',
        "line\nbreak",
        "\\",
        "'''",
        '"""',
        "__import__('os').system('x')",
        "\u2028",
        "é😀",
        1,
        -3,
        0.1,
        1e-5,
        True,
        None,
        [1, "x"],
        (1,),
        (),
        {"k": [1.5, None]},
        {1: "a"},
    ],
)
def test_literal_evaluates_back_to_the_value(value):
    assert ast.literal_eval(literal(value)) == value


@pytest.mark.parametrize("value", [object(), math.inf, math.nan, {("a",): 1}, b"bytes", {True: 1}])
def test_literal_refuses_what_is_not_plain_data(value):
    with pytest.raises(RenderError):
        literal(value)


@pytest.mark.parametrize("name", ["", "a-b", "1a", "class", "__import__", "a.b", "a b", "x\n", "os;"])
def test_ident_refuses_non_identifiers(name):
    with pytest.raises(RenderError):
        ident(name)


def test_comment_is_one_inert_line():
    text = comment('x\n__import__("os")\r\u2028"""')
    assert "\n" not in text and "\r" not in text and '"""' not in text
    lines = comment_lines("a " * 80, "    ")
    assert all(len("    " + line.strip()) <= 100 for line in lines.split("\n"))
    assert all(line.strip().startswith("#") for line in lines.split("\n"))


def test_templates_use_strict_undefined():
    env = environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def _build_text(text: str):
    result = validate_text(text, "hostile.rl.yaml")
    assert result.ok, [d.message for d in result.diagnostics]
    return build(result)


def test_hostile_values_are_rendered_as_literals():
    text = PPO_TEXT.replace(
        "env:\n  id: CartPole-v1\n",
        "env:\n  id: CartPole-v1\n"
        "  kwargs: {render_mode: \"x\\\"); __import__('os').system('echo pwned'); (\\\"\\n\"}\n",
    )
    text = text.replace("description: PPO", 'description: "\\"\\"\\" \\n import os" # PPO')
    files = _build_text(text).files
    code = "".join(v for k, v in files.items() if k.endswith(".py"))
    for rel, src in files.items():
        if rel.endswith(".py"):
            tree = ast.parse(src)
            calls = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "__import__"
            ]
            assert not calls, rel
    assert "render_mode" in code  # present, but as a string literal


def test_hostile_spec_file_names_stay_in_comments():
    result = validate_text(PPO_TEXT, 'evil\n__import__("os").system("x")#.rl.yaml')
    files = build(result, spec_file=result.file).files
    for rel, src in files.items():
        if rel.endswith(".py"):
            tree = ast.parse(src)
            assert not [
                n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "__import__"
            ]


def test_names_outside_the_language_never_reach_templates():
    bad = PPO_TEXT.replace("  actor: {kind: policy", "  Actor-1: {kind: policy")
    assert not validate_text(bad).ok


def test_write_tree_refuses_paths_outside_the_build_dir(tmp_path):
    with pytest.raises(BuildError, match="outside"):
        write_tree({"../escape.py": "x = 1\n"}, tmp_path / "out")
    assert not (tmp_path / "escape.py").exists()


def test_build_refuses_to_overwrite_a_foreign_directory(tmp_path):
    (tmp_path / "precious.txt").write_text("keep")
    with pytest.raises(BuildError, match="not empty"):
        write_tree({"a.py": "x = 1\n"}, tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep"


def test_rebuild_replaces_a_previous_build(tmp_path):
    out = tmp_path / "b"
    write_tree({"a.py": "x = 1\n"}, out)
    write_tree({"b.py": "y = 1\n"}, out)
    assert sorted(p.name for p in out.iterdir()) == [".rlgen-build", "b.py"]


@pytest.mark.parametrize("policy", ["single", "actors-learner", "multi-learner"])
def test_the_learners_output_is_logged_whatever_its_name(policy):
    """`metrics` is not magic: the value the learner's update produces is what the rank loop logs."""
    text = PPO_TEXT.replace("-> metrics", "-> stats")
    result = validate_text(text, policy=policy, workers=None if policy == "single" else 2)
    assert result.ok, [d.message for d in result.diagnostics]
    main = next(src for rel, src in build(result).files.items() if rel.endswith("/main.py"))
    assert "metrics=stats," in main and "metric_names=METRICS," in main
    assert "metrics=metrics" not in main


def test_a_conditional_learner_output_starts_as_none_under_its_own_name():
    dqn = (ROOT / "examples" / "dqn-cartpole.rl.yaml").read_text().replace("-> metrics", "-> losses")
    main = next(src for rel, src in _build_text(dqn).files.items() if rel.endswith("/main.py"))
    assert "losses = None  # until a learning block runs" in main and "metrics=losses," in main


def test_an_identical_build_is_reused_untouched_and_any_change_rebuilds(tmp_path):
    from rlgen.api import validate_file
    from rlgen.dsl.overrides import seed_setting

    spec = ROOT / "examples" / "ppo-cartpole.rl.yaml"
    out = tmp_path / "b"
    build(validate_file(spec), out)
    main = next(out.glob("*/main.py"))
    stamp = main.stat().st_mtime_ns
    again = build(validate_file(spec), out)  # the same spec, the same rlgen: nothing rewritten
    assert main.stat().st_mtime_ns == stamp and again.files[str(main.relative_to(out))] == main.read_text()
    assert [r.rank for r in again.fdg.ranks] == [0]
    main.write_text(main.read_text() + "# edited\n")  # an edited build is rendered again
    build(validate_file(spec), out)
    assert "# edited" not in main.read_text()
    stamp = main.stat().st_mtime_ns
    build(validate_file(spec, settings=[seed_setting(3)]), out)  # another spec: rendered again
    assert main.stat().st_mtime_ns != stamp and "seed=3" in main.read_text()
