"""The three check commands end to end: output for humans, --json for scripts, exit 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.skillspec import main
from tests.skillspec.fixtures.cases import spec

VALID = spec(
    "rules:\n  - id: r1\n    when: {user_says_any: [local]}\n    prefer: local\n"
    "tests:\n  - name: t\n    input: local\n    expect: {route: local}\n"
)
INVALID = spec("rules:\n  - id: r1\n    prefer: nowhere\n    preferr: local\n")


def write(tmp_path: Path, text: str, name: str = "skill.spec.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validate_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, VALID)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {path} (fixture.spec)")
    assert "2 routes, 1 rules, 1 tests" in out


def test_validate_invalid_renders_caret_and_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, INVALID)
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"{path}:12:13: error: rules[0].prefer: unknown reference" in out
    assert f"{path}:13:5: error: rules[0]: unknown field `preferr`" in out
    caret_at = lines.index("  |     prefer: nowhere")
    assert lines[caret_at + 1] == "  |             ^"
    assert lines[-1] == f"invalid: {path}: 2 errors (structure)"


def test_validate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, INVALID)
    assert main(["validate", str(path), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is False and payload["structural_ok"] is False
    assert [(e["path"], e["line"], e["col"]) for e in payload["errors"]] == [
        ("rules[0].prefer", 12, 13),
        ("rules[0]", 13, 5),
    ]


def test_validate_unreadable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A file that reads but does not parse is an invalid spec, exit 1 like the reference
    # (issue 13, item 14); exit 2 is kept for a file that cannot be read at all.
    path = write(tmp_path, "a: [\n")
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2:1" in out and f"invalid: {path}" in out
    assert main(["validate", str(tmp_path / "absent.yml"), "--json"]) == 2
    payload = json.loads(capsys.readouterr().out)
    assert payload["unreadable"] is True and "cannot read" in payload["errors"][0]["message"]


def test_validate_file_errors_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = spec(
        "resources:\n  src: {path: SKILL.md, role: reference,"
        " used_by: [{kind: route, id: local}]}\n"
    )
    path = write(tmp_path, text)
    assert main(["validate", str(path)]) == 1
    assert "(package files)" in capsys.readouterr().out
    (tmp_path / "SKILL.md").write_text("# Skill\n")
    assert main(["validate", str(path)]) == 0


def test_imports_check_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.md").write_text("# Base\n## Rules\nx\n")
    text = spec(
        "imports:\n"
        "  top: {path: base.md, role: policy, load: always, requires: {imports: [base]}}\n"
        "  base: {path: base.md, role: policy, section: Rules, load: always}\n"
        "  gone: {path: ~/x.md, role: policy, load: always}\n"
    )
    path = write(tmp_path, text)
    assert main(["imports", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "load order: base, gone, top" in out
    assert "base: base.md #Rules (2 lines)" in out
    assert "invalid_path" in out and "`~`" in out
    assert main(["imports", "check", str(path), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["load_order"] == ["base", "gone", "top"]
    statuses = {e["id"]: e["status"] for e in payload["imports"]}
    assert statuses == {"base": "ok", "gone": "invalid_path", "top": "ok"}
    assert payload["cycles"] == []


def test_imports_check_reports_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    text = spec(
        "imports:\n"
        "  one: {path: a.md, role: policy, requires: {imports: [two]}}\n"
        "  two: {path: a.md, role: policy, requires: {imports: [one]}}\n"
    )
    path = write(tmp_path, text)
    assert main(["imports", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "cycle: one -> two -> one" in out


def test_deps_check_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    text = spec("dependencies:\n  jq: {kind: cli}\n  pypdf: {kind: package}\n")
    path = write(tmp_path, text)
    assert main(["deps", "check", str(path), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["status"]) for d in payload["dependencies"]] == [
        ("jq", "missing"),
        ("pypdf", "deferred"),
    ]
    assert main(["deps", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "needs a harness check  pypdf [package]" in out
    assert out.rstrip().endswith("1 missing, 1 need a harness check")


def test_deps_check_refuses_invalid_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, INVALID)
    assert main(["deps", "check", str(path)]) == 1
    assert "fix the spec before this check" in capsys.readouterr().out
