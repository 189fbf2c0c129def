"""Fuzz-found skillspec crashes and conformance gaps (issue 13, items 6, 7, 11, 12).

Each spec here used to raise a Python exception (``TypeError: unhashable
type: 'LocDict'``, ``OSError: File name too long``, ``ValueError``) or to be
accepted where the reference rejects it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.skillspec.decide import compile_spec, decide
from engine.skillspec.load import check_spec
from tests.skillspec.fixtures.base import HEADER, ROUTES


def spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "skill.spec.yml"
    path.write_text(HEADER + ROUTES + body)
    return path


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            "imports:\n  guide:\n    path: guide.md\n    used_by:\n"
            "      - kind: {}\n        id: x\n",
            "imports.guide.used_by[0].kind",
        ),
        (
            "artifacts:\n  out:\n    path: out.txt\n    consumed_by:\n"
            "      - kind: {a: 1}\n        id: x\n",
            "artifacts.out.consumed_by[0].kind",
        ),
    ],
)
def test_a_mapping_where_a_kind_string_is_expected_is_a_located_error(
    tmp_path: Path, body: str, field: str
) -> None:
    report = check_spec(spec(tmp_path, body))
    assert not report.ok
    assert any(d.path == field and d.location.line > 0 for d in report.errors), [
        str(d) for d in report.errors
    ]


def test_a_mapping_as_a_phase_id_is_a_located_error(tmp_path: Path) -> None:
    text = (
        HEADER + "routes:\n  - id: local\n    label: Local\n    execution_plan:\n      phases:\n"
        "        - id: {a: 1}\n          route: local\n"
    )
    path = tmp_path / "skill.spec.yml"
    path.write_text(text)
    report = check_spec(path)
    assert not report.ok
    assert any("phases[0].id" in d.path for d in report.errors), [str(d) for d in report.errors]


def test_an_import_path_longer_than_a_file_name_may_be_is_a_located_error(
    tmp_path: Path,
) -> None:
    long_name = "a" * 300 + ".md"
    report = check_spec(spec(tmp_path, f"imports:\n  guide:\n    path: {long_name}\n"))
    assert not report.ok  # raised OSError: File name too long in crosses_symlink
    (err,) = [d for d in report.errors if d.path == "imports.guide.path"]
    assert (err.location.line, err.location.col) == (12, 11) and "too long" in err.message


def test_a_huge_hex_import_role_does_not_crash(tmp_path: Path) -> None:
    path = spec(
        tmp_path, "imports:\n  guide:\n    path: guide.md\n    role: 0x" + "f" * 5000 + "\n"
    )
    (tmp_path / "guide.md").write_text("# Guide\n")
    report = check_spec(path)  # raised ValueError (int max str digits) in load.py
    assert report.data is not None


RULE = """\
rules:
  - id: agent
    when:
      user_says_any: [agent]
    prefer: local
    allow:
      code: 012
      plain: 12
"""


def test_a_leading_zero_allow_value_decides_as_the_string_the_reference_gives(
    tmp_path: Path,
) -> None:
    # item 11: `012` is a string in YAML 1.2 (serde_yaml); it was decided as 12
    report = check_spec(spec(tmp_path, RULE))
    assert report.ok, [str(d) for d in report.errors]
    decision = decide(compile_spec(report.data), "call the agent").to_json()
    assert decision["allow"] == {"code": "012", "plain": 12}


@pytest.mark.parametrize(
    "value",
    ["18446744073709551616", "-9223372036854775809", "340282366920938463463374607431768211455"],
)
def test_integers_outside_64_bits_in_free_form_maps_are_rejected(
    tmp_path: Path, value: str
) -> None:
    # item 12: the reference's free-form values hold i64/u64; this was accepted
    report = check_spec(spec(tmp_path, RULE.replace("plain: 12", f"plain: {value}")))
    assert not report.structural_ok
    (err,) = report.errors
    assert err.path == "rules[0].allow.plain" and err.location.line == 17
    assert "out of range" in err.message
    meta = check_spec(spec(tmp_path, f"metadata:\n  big: [{value}]\n"))
    assert [d.path for d in meta.errors] == ["metadata.big[0]"]


def test_64_bit_limits_themselves_are_accepted(tmp_path: Path) -> None:
    body = "metadata:\n  hi: 18446744073709551615\n  lo: -9223372036854775808\n"
    assert check_spec(spec(tmp_path, body)).ok


def test_a_chain_of_thousands_of_imports_is_a_verdict_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    # found while fuzzing: import_cycles and load_order recursed once per import
    n = 3000
    body = ["imports:"]
    for i in range(n):
        nxt = f"[i{i + 1:05d}]" if i + 1 < n else "[]"
        body += [f"  i{i:05d}:", "    path: g.md", "    role: reference"]
        body += [f"    requires: {{imports: {nxt}}}"]
    (tmp_path / "g.md").write_text("# G\n")
    path = spec(tmp_path, "\n".join(body) + "\n")
    report = check_spec(path)
    assert report.data is not None
    from engine.skillspec.imports import check_imports

    order = check_imports(report.data, path).load_order
    assert len(order) == n and order[0] == f"i{n - 1:05d}" and order[-1] == "i00000"


#: Issue 22: each of these reached ``Path.stat()``/``Path.exists()`` and raised
#: ValueError (NUL) or OSError (ENAMETOOLONG): ``skillspec validate`` exited 70.
REFUSED = {
    "nul": '"a\\0b.md"',
    "long name": "n" * 300 + ".md",
    "long path": "d/" * 2100 + "f.md",
}


@pytest.mark.parametrize("value", sorted(REFUSED))
@pytest.mark.parametrize(
    ("body", "field", "line"),
    [
        ("resources:\n  src:\n    path: {v}\n    role: source_material\n", "resources.src", 12),
        (
            "code:\n  gen:\n    language: py\n    kind: transform\n    source:\n      file: {v}\n",
            "code.gen.source.file",
            15,
        ),
        (
            "dependencies:\n  dependency_ledger:\n    kind: file\n    path: {v}\n",
            "dependencies.dependency_ledger",
            13,
        ),
        ("imports:\n  guide:\n    path: {v}\n    role: reference\n", "imports.guide.path", 12),
    ],
)
def test_a_path_the_os_refuses_is_a_located_error_in_the_real_program(
    tmp_path: Path, value: str, body: str, field: str, line: int
) -> None:
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    path = spec(tmp_path, body.format(v=REFUSED[value]))
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.skillspec", "validate", str(path), "--json"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"},
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    (error,) = [e for e in errors if e["path"] == field and e["line"] == line] or [errors]
    # An import path's NUL is refused earlier, as shell syntax ('\x00' is not expanded).
    assert any(word in error["message"] for word in ("NUL", "too long", "\\x00"))
