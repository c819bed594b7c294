"""The safe YAML loader: YAML 1.2 core scalars, plain data only, duplicate keys, bounded size and
depth, positions, and reading only regular files up to the size limit."""

from __future__ import annotations

import os
import time

import pytest

from rlgen.dsl.specfile import SpecFileError, load_file, read_spec
from rlgen.dsl.yamlload import MAX_BYTES, YamlError, load_yaml


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


# --- YAML 1.2 core schema: what editors and JSON Schema tools read ------------------------------
@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("True", True),
        ("FALSE", False),
        ("1:30", "1:30"),  # YAML 1.1 read this as 90
        ("0o17", 15),
        ("017", 17),  # YAML 1.1 read this as octal 15
        ("0x1F", 31),
        ("1_000", "1_000"),
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
        ("1e3", 1000.0),
        ("-.5", -0.5),
        ("+7", 7),
        ("~", None),
        ("Null", None),
        ("=", "="),
        ('"yes"', "yes"),
    ],
)
def test_scalars_resolve_as_in_the_yaml_1_2_core_schema(scalar, value):
    data, _ = load_yaml(f"a: {scalar}\n")
    assert data["a"] == value and type(data["a"]) is type(value)


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("a: !!bool maybe\n", "E103", "'maybe' is not a boolean"),
        ("a: !!int 1.5\n", "E103", "'1.5' is not an integer"),
        ("a: !!float abc\n", "E103", "'abc' is not a number"),
        ("a: !!null x\n", "E103", "'x' is not null"),
        ("a: .nan\n", "E108", "not a finite number"),
        ("a: -.inf\n", "E108", "not a finite number"),
        ("a: 1e999\n", "E108", "not a finite number"),
        ("a: !!float .inf\n", "E108", "not a finite number"),
        ("a: " + "1" * 5000 + "\n", "E103", "an integer of 5,000 digits is too long"),
    ],
)
def test_scalars_that_do_not_fit_their_tag_or_are_not_finite_are_errors(text, code, message):
    with pytest.raises(YamlError) as exc:
        load_yaml(text)
    (d,) = exc.value.diagnostics
    assert d.code == code and message in d.message and d.hint
    assert (d.line, d.column) == (1, 4)


def test_explicit_standard_tags_that_fit_are_fine():
    data, _ = load_yaml("a: !!str 5\nb: !!int '7'\nc: !!float 3\nd: !!bool true\n")
    assert data == {"a": "5", "b": 7, "c": 3.0, "d": True}


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f"])
def test_a_control_character_is_an_error_at_its_position(char):
    with pytest.raises(YamlError) as exc:
        load_yaml(f"a: 1\nb: x{char}y\n")
    (d,) = exc.value.diagnostics
    assert (d.code, d.line, d.column) == ("E101", 2, 5)
    assert f"U+{ord(char):04X}" in d.message


@pytest.mark.parametrize(
    "text",
    [
        "x: &s 3\ny:\n  <<: *s\n",  # a scalar
        "x: &s [1]\ny:\n  <<: *s\n",  # a list of non-mappings
        "x: &s [[{a: 1}]]\ny:\n  <<: *s\n",
    ],
)
def test_a_merge_key_onto_anything_but_mappings_is_an_error(text):
    with pytest.raises(YamlError) as exc:
        load_yaml(text)
    assert codes(exc.value) == ["E107"]


def test_merge_key_sources_in_order_and_explicit_keys_win():
    data, _ = load_yaml("a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n")
    assert data["c"] == {"x": 1, "y": 1, "z": 3}


def test_a_mapping_merging_itself_is_an_error_not_a_hang():
    with pytest.raises(YamlError) as exc:
        load_yaml("a: &a\n  x: 1\n  <<: *a\n")
    assert codes(exc.value) == ["E105"]


def test_deep_nesting_is_refused_before_the_parser_recurses():
    for depth in (51, 600, 5000):
        with pytest.raises(YamlError) as exc:
            load_yaml("a: " + "[" * depth + "]" * depth + "\n")
        assert codes(exc.value) == ["E105"] and "nest more than 50 levels" in exc.value.diagnostics[0].message
    data, _ = load_yaml("a: " + "[" * 48 + "]" * 48 + "\n")
    assert data["a"] is not None


def test_an_aliased_long_string_is_stopped_by_the_text_budget():
    text = "s: &s " + "x" * 900_000 + "\nt: [" + ", ".join(["*s"] * 1000) + "]\n"
    start = time.perf_counter()
    with pytest.raises(YamlError) as exc:
        load_yaml(text)
    assert codes(exc.value) == ["E105"] and "characters of text" in exc.value.diagnostics[0].message
    assert time.perf_counter() - start < 5


def test_numbers_as_keys_are_the_key_as_written():
    data, _ = load_yaml("1: a\n0x10: b\ntrue: c\nnull: d\n")
    assert data == {"1": "a", "0x10": "b", "true": "c", "null": "d"}


# --- reading files --------------------------------------------------------------------------
def test_a_pipe_is_read_to_its_end_and_never_waited_on_forever(tmp_path, monkeypatch):
    from rlgen.dsl import specfile

    fifo = tmp_path / "spec.rl.yaml"
    os.mkfifo(fifo)
    start = time.perf_counter()
    assert read_spec(fifo) == ""  # a FIFO with no writer: empty at once, never blocked on
    assert time.perf_counter() - start < 5
    monkeypatch.setattr(specfile, "PIPE_WAIT_S", 0.3)
    for written, closed in (("rlgen: 1\n", True), ("", False)):
        r, w = os.pipe()  # as bash's <(command) hands it over: /dev/fd/N
        try:
            os.write(w, written.encode())
            if closed:
                os.close(w)
            path = tmp_path / f"pipe-{closed}"
            os.symlink(f"/proc/{os.getpid()}/fd/{r}", path)
            if closed:
                assert read_spec(path) == written
            else:  # a writer alive and silent: given up on, saying why
                with pytest.raises(SpecFileError, match="nothing came through the pipe for 0.3 s"):
                    read_spec(path)
        finally:
            os.close(r)
            if not closed:
                os.close(w)


@pytest.mark.parametrize(("path", "what"), [("/dev/zero", "character device"), ("/", "directory")])
def test_devices_and_directories_are_refused(path, what):
    with pytest.raises(OSError, match=what):
        read_spec(path)


def test_a_file_is_read_only_up_to_the_limit(tmp_path, monkeypatch):
    big = tmp_path / "big.rl.yaml"
    big.write_text("a: 1\n" * (MAX_BYTES // 5 + 10))
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(YamlError) as exc:
        read_spec(big)
    assert codes(exc.value) == ["E105"] and sum(reads) <= MAX_BYTES + 1


def test_a_file_of_many_small_values_is_refused_early():
    """Counting while composing: a 400 kB list of 100,000 values stops at the 20,000th, fast."""
    start = time.perf_counter()
    with pytest.raises(YamlError) as exc:
        load_yaml("x: [" + ",".join(["[1]"] * 99_000) + "]\n")
    assert codes(exc.value) == ["E105"] and "more than 20,000 values" in exc.value.diagnostics[0].message
    assert time.perf_counter() - start < 5
