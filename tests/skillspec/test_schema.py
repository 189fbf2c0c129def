"""Strict structure: every one-defect fixture is rejected on the right line, naming the key;
every valid near-miss is accepted, and the reference's scalar rules hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.skillspec.load import SpecReport, check_spec
from tests.skillspec.fixtures.cases import HEADER, INVALID, VALID, Case, spec


def write_case(tmp_path: Path, case: Case) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for rel, content in case.files:
        target = pkg / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    path = pkg / "skill.spec.yml"
    path.write_text(case.text)
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "skill.spec.yml"
    path.write_text(text)
    return path


def test_table_sizes() -> None:
    assert len(INVALID) >= 60
    assert len(VALID) >= 20
    assert len({c.name for c in INVALID + VALID}) == len(INVALID) + len(VALID)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_fixture_names_key_and_line(tmp_path: Path, case: Case) -> None:
    path = write_case(tmp_path, case)
    report = check_spec(path)
    assert not report.ok
    assert not report.unreadable
    unresolved = check_spec(path, resolve_files=False)
    # A file-only defect must not break the structural verdict, and vice versa.
    assert unresolved.structural_ok is case.files_only
    on_line = [d for d in report.errors if d.location.line == case.line]
    assert on_line, f"no error on line {case.line}: {[str(d) for d in report.errors]}"
    assert any(case.needle in d.message or case.needle in d.path for d in on_line), [
        str(d) for d in on_line
    ]
    assert all(d.location.file == str(path) for d in report.errors)


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.name)
def test_valid_near_miss_is_accepted(tmp_path: Path, case: Case) -> None:
    report = check_spec(write_case(tmp_path, case))
    assert report.ok, [str(d) for d in report.errors]
    assert report.errors == ()


def _errors(report: SpecReport) -> list[str]:
    return [d.message for d in report.errors]


def test_all_structural_errors_are_collected(tmp_path: Path) -> None:
    text = spec(
        "rules:\n  - id: r1\n    preferr: local\n"
        "  - id: r2\n    when:\n      domain_object_task: yes\n"
        "states:\n  s:\n    nexxt: s\n"
    )
    report = check_spec(write(tmp_path, text))
    messages = _errors(report)
    assert any("`preferr`" in m for m in messages)
    assert any("boolean" in m and '"yes"' in m for m in messages)
    assert any("`nexxt`" in m for m in messages)
    lines = [d.location.line for d in report.errors]
    assert lines == sorted(lines), "diagnostics must come in file order"


def test_unknown_field_lists_expected_keys_like_reference(tmp_path: Path) -> None:
    report = check_spec(write(tmp_path, spec("rules:\n  - id: r1\n    preferr: local\n")))
    (diag,) = report.errors
    assert diag.path == "rules[0]"
    assert diag.message.startswith("unknown field `preferr`, expected one of `id`, `when`")
    assert diag.location.col == 5


def test_missing_header_fields_reported_together(tmp_path: Path) -> None:
    report = check_spec(write(tmp_path, "schema: skillspec/v0\nid: a\n"))
    assert {"missing field `title`", "missing field `description`"} <= set(_errors(report))


def test_string_fields_keep_source_text_of_scalars(tmp_path: Path) -> None:
    text = spec("rules:\n  - id: r1\n    reason: 1.10\n    forbid: [0x1F, true, ~]\n")
    report = check_spec(write(tmp_path, text))
    assert report.ok, _errors(report)
    assert report.data is not None
    rule = report.data["rules"][0]
    assert rule["reason"] == "1.10"
    assert rule["forbid"] == ["0x1F", "true", "~"]


def test_empty_value_is_empty_but_explicit_null_is_not_a_list(tmp_path: Path) -> None:
    ok = check_spec(write(tmp_path, HEADER + "routes:\nrules:\n"))
    assert ok.ok
    assert ok.data is not None and ok.data["routes"] == []
    bad = check_spec(write(tmp_path, HEADER + "routes: ~\n"))
    assert not bad.ok
    assert "expected a sequence" in bad.errors[0].message


def test_inside_code_source_strings_must_be_strings(tmp_path: Path) -> None:
    body = "code:\n  c:\n    language: 3\n    kind: example\n    source:\n      inline: {}\n"
    report = check_spec(write(tmp_path, spec(body.replace("{}", "'7'"))))
    assert report.ok, _errors(report)  # language: 3 is text; quoted inline is a string
    report = check_spec(write(tmp_path, spec(body.replace("{}", "7"))))
    assert any("expected a string" in m for m in _errors(report))


def test_recipe_step_with_unknown_extra_key_names_it(tmp_path: Path) -> None:
    body = "recipes:\n  r:\n    steps:\n      - note: hi\n        colour: red\n"
    report = check_spec(write(tmp_path, spec(body)))
    assert any("unknown field `colour`" in m for m in _errors(report))


def test_u32_rejects_out_of_range(tmp_path: Path) -> None:
    body = (
        "code:\n  c:\n    language: sh\n    kind: example\n"
        "    source:\n      file: a.sh\n      fence_index: 4294967296\n"
    )
    report = check_spec(write(tmp_path, spec(body)), resolve_files=False)
    assert any("u32" in m for m in _errors(report))


def test_nesting_limit_matches_reference_reader(tmp_path: Path) -> None:
    def nested(depth: int) -> str:
        # metadata is free-form; the whole document adds two levels (root, metadata)
        return HEADER + "metadata:\n  deep: " + "[" * depth + "]" * depth + "\n"

    assert check_spec(write(tmp_path, nested(126))).ok
    report = check_spec(write(tmp_path, nested(127)))
    assert not report.ok
    assert "recursion limit" in report.errors[0].message
    assert report.errors[0].location.line == 6


def test_rank_outside_i64_is_rejected(tmp_path: Path) -> None:
    text = spec("  - id: big\n    label: B\n    rank: 9223372036854775808\n")
    assert any("i64" in m for m in _errors(check_spec(write(tmp_path, text))))
