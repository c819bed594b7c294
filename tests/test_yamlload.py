"""The safe YAML loader: plain data only, duplicate keys, bombs, positions, YAML 1.2 floats."""

from __future__ import annotations

import time

import pytest

from rlgen.dsl.yamlload import MAX_BYTES, YamlError, load_file, load_yaml


def codes(exc: YamlError) -> list[str]:
    return [d.code for d in exc.diagnostics]


def test_positions_of_nested_values_and_keys():
    data, smap = load_yaml("a:\n  b: [1, 2]\n  c:\n    - x: 3\n", "f.yaml")
    assert data == {"a": {"b": [1, 2], "c": [{"x": 3}]}}
    assert (smap.values[("a", "b", 1)].line, smap.values[("a", "b", 1)].column) == (2, 10)
    assert (smap.values[("a", "c", 0, "x")].line, smap.values[("a", "c", 0, "x")].column) == (4, 10)
    assert (smap.keys[("a", "c")].line, smap.keys[("a", "c")].column) == (3, 3)
    # unknown paths fall back to the nearest ancestor
    assert smap.span(("a", "b", 7)).line == 2


def test_duplicate_key_is_an_error_naming_both_lines():
    with pytest.raises(YamlError) as exc:
        load_yaml("a: 1\nb: 2\na: 3\n")
    (d,) = exc.value.diagnostics
    assert (d.code, d.line, d.column) == ("E102", 3, 1)
    assert "first defined on line 1" in d.message


@pytest.mark.parametrize(
    "text",
    [
        "a: !!python/object/apply:os.system ['true']\n",
        "a: !!python/name:os.system\n",
        "a: !custom 3\n",
        "a: !!binary aGVsbG8=\n",
    ],
)
def test_tags_other_than_plain_data_are_refused(text):
    with pytest.raises(YamlError) as exc:
        load_yaml(text)
    assert codes(exc.value) == ["E103"]


def test_exponent_floats_are_numbers_as_in_yaml_1_2():
    data, _ = load_yaml("a: 1e-3\nb: 1.0e-3\nc: 3E+5\nd: 1.2.3\ne: 7\nf: .5\n")
    assert data == {"a": 1e-3, "b": 1e-3, "c": 3e5, "d": "1.2.3", "e": 7, "f": 0.5}
    assert isinstance(data["e"], int)


def test_alias_bomb_is_stopped_quickly():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    start = time.perf_counter()
    with pytest.raises(YamlError) as exc:
        load_yaml("\n".join(lines) + "\n")
    assert codes(exc.value) == ["E105"]
    assert time.perf_counter() - start < 5  # bounded work, not 10^9 nodes


def test_recursive_alias_is_an_error_not_a_crash():
    with pytest.raises(YamlError) as exc:
        load_yaml("a: &x [1, *x]\n")
    assert codes(exc.value) in (["E105"], ["E101"])


def test_merge_keys_work_and_plain_aliases_are_fine():
    data, _ = load_yaml("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert data["other"] == {"x": 1, "y": 3}


def test_syntax_error_has_line_and_column():
    with pytest.raises(YamlError) as exc:
        load_yaml("a:\n  b: 1\n c: 2\n")
    (d,) = exc.value.diagnostics
    assert d.code == "E101" and d.line == 3


def test_empty_document():
    with pytest.raises(YamlError) as exc:
        load_yaml("# only a comment\n")
    assert codes(exc.value) == ["E106"]


def test_size_limit(tmp_path):
    big = tmp_path / "big.rl.yaml"
    big.write_text("a: " + "x" * (MAX_BYTES + 10) + "\n")
    with pytest.raises(YamlError) as exc:
        load_file(big)
    assert codes(exc.value) == ["E105"]


def test_non_utf8_file(tmp_path):
    f = tmp_path / "latin1.rl.yaml"
    f.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(YamlError) as exc:
        load_file(f)
    assert codes(exc.value) == ["E101"] and "UTF-8" in exc.value.diagnostics[0].message
