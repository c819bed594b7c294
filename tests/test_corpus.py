"""The invalid-spec corpus: each file states the errors it must produce (line, column, code, text).

A corpus file carries its expectations in comments:

    # expect: 17:5 E202 unknown key 'gama' (did you mean 'gamma'?)

Every expected error must be reported at that exact position with that code and
containing that text, and no other *error* may be reported. The full text
output is also kept as a snapshot in tests/golden/errors/ (--update-goldens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlgen.api import validate_file
from rlgen.dsl.diagnostics import Severity
from rlgen.dsl.report import format_text

from conftest import ROOT, check_golden

CORPUS = sorted((ROOT / "tests" / "corpus" / "invalid").glob("*.rl.yaml"))
EXPECT = re.compile(r"^# expect: (\d+):(\d+) ([EW]\d{3}) (.+)$")


def expectations(path: Path) -> list[tuple[int, int, str, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = EXPECT.match(line)
        if m:
            out.append((int(m[1]), int(m[2]), m[3], m[4]))
    return out


def test_corpus_is_large_and_every_file_has_expectations():
    assert len(CORPUS) >= 30
    codes = {code for f in CORPUS for _, _, code, _ in expectations(f)}
    assert len(codes) >= 30, sorted(codes)  # 30+ *distinct* failure kinds
    for f in CORPUS:
        assert expectations(f), f"{f.name} has no '# expect:' line"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_invalid_spec_reports_exactly_the_expected_errors(path: Path, update_goldens: bool):
    result = validate_file(path)
    assert not result.ok
    expected = expectations(path)
    got = [
        d
        for d in result.diagnostics
        if d.severity is Severity.ERROR or any(code == d.code for _, _, code, _ in expected)
    ]
    assert sorted((d.line, d.column, d.code) for d in got) == sorted((ln, col, c) for ln, col, c, _ in expected)
    for line, col, code, text in expected:
        (d,) = [d for d in got if (d.line, d.column, d.code) == (line, col, code)]
        assert text in d.message, f"{d.message!r} does not contain {text!r}"
        assert d.hint, f"{code} at {line}:{col} gives no hint on how to fix it"
    snapshot = format_text(result.diagnostics, {result.file: result.text}).replace(str(ROOT) + "/", "")
    check_golden(
        ROOT / "tests" / "golden" / "errors" / f"{path.name.removesuffix('.rl.yaml')}.txt",
        snapshot + "\n",
        update_goldens,
    )
