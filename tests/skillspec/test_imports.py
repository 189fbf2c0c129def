"""Imports: lexical paths, sections, the DAG and load order, flags, the spec fingerprint."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from engine.skillspec.imports import (
    check_imports,
    crosses_symlink,
    extract_section,
    has_section,
    leaves_root,
    load_order,
    path_problem,
)
from engine.skillspec.load import check_spec, spec_fingerprint
from tests.skillspec.fixtures.cases import spec

DOC = """\
# Guide

intro

## Setup

step one

### Details

deep detail

```sh
# not a heading
```

## Usage

use it

# Appendix
"""


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("guide.md", None),
        ("docs/guide.md", None),
        ("../shared/INDEX.md", None),
        ("./a b.md", None),
        ("", "empty"),
        ("~/guide.md", "`~`"),
        ("~alice/guide.md", "`~`"),
        ("$HOME/guide.md", "environment variables"),
        ("${SKILL_DIR}/x.md", "environment variables"),
        ("$(cat x).md", "environment variables"),
        ("`whoami`.md", "shell syntax"),
        ("a.md; rm -rf x", "shell syntax"),
        ("docs/*.md", "shell syntax"),
        ("/etc/passwd", "absolute"),
        ("https://example.com/x.md", "URL"),
        ("file:///tmp/x.md", "URL"),
    ],
)
def test_path_problems(raw: str, problem: str | None) -> None:
    found = path_problem(raw)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_leaves_root_is_lexical() -> None:
    assert leaves_root("../x.md")
    assert leaves_root("a/../../x.md")
    assert not leaves_root("a/../x.md")
    assert not leaves_root("..x/y.md")


def test_section_extraction_stops_at_same_or_higher_heading() -> None:
    setup = extract_section(DOC, "Setup")
    assert setup is not None
    assert setup.startswith("## Setup")
    assert "deep detail" in setup  # children are included
    assert "# not a heading" in setup  # fenced '#' lines do not end the section
    assert "use it" not in setup
    details = extract_section(DOC, "### details")
    assert details is not None and "deep detail" in details and "use it" not in details
    usage = extract_section(DOC, "usage")
    assert usage is not None and usage.rstrip().endswith("use it")
    appendix = extract_section(DOC, "Appendix")
    assert appendix == "# Appendix\n"
    assert extract_section(DOC, "Missing") is None
    # a '#' line inside a fence is only a heading when fences are ignored (reference rule)
    assert extract_section(DOC, "not a heading") is None
    assert has_section(DOC, "not a heading")
    assert extract_section(DOC, "not a heading", fences=False) is not None


def test_has_section_follows_reference_matching() -> None:
    assert has_section(DOC, "SETUP")
    assert has_section(DOC, "## Usage ##")
    assert not has_section(DOC, "Set")


def test_load_order_is_dependency_first_and_reports_cycles() -> None:
    order, cycles = load_order({"app": ["lib", "core"], "lib": ["core"], "core": [], "z": []})
    assert order == ["core", "lib", "app", "z"]
    assert cycles == []
    order, cycles = load_order({"a": ["b"], "b": ["a"], "c": []})
    assert cycles == [["a", "b", "a"]]
    assert "c" in order


def write_spec(tmp_path: Path, imports: str) -> Path:
    path = tmp_path / "skill" / "skill.spec.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(spec("imports:\n" + imports))
    return path


def test_check_reports_statuses_and_flags(tmp_path: Path) -> None:
    (tmp_path / "shared.md").write_text("# Shared\n## Policy\np\n")
    path = write_spec(
        tmp_path,
        "  outside: {path: ../shared.md, role: policy, load: always, section: Policy}\n"
        "  nosec: {path: ../shared.md, role: policy, load: always, section: Nope}\n"
        "  gone: {path: missing.md, role: policy, load: always}\n"
        "  shell: {path: $HOME/x.md, role: policy, load: always}\n",
    )
    report = check_spec(path)
    assert report.data is not None
    result = check_imports(report.data, path)
    by_id = {e.id: e for e in result.imports}
    assert by_id["outside"].status == "ok"
    assert by_id["outside"].section_found is True
    assert by_id["outside"].section_lines == 2  # "## Policy" and its one line
    assert by_id["nosec"].section_lines is None
    assert by_id["outside"].flags == ("leaves_package_root",)
    assert by_id["outside"].resolved_path == str(tmp_path / "shared.md")
    assert by_id["nosec"].status == "missing_section"
    assert by_id["gone"].status == "missing_file"
    assert by_id["shell"].status == "invalid_path"
    assert not result.ok
    assert report.structural_ok and not report.files_ok
    assert {d.code for d in report.errors} == {
        "import_missing_section",
        "import_missing_file",
        "import_invalid_path",
    }
    assert any(d.code == "leaves_package_root" for d in report.warnings)


def test_non_utf8_import_is_unreadable_like_the_reference(tmp_path: Path) -> None:
    (tmp_path / "skill").mkdir()
    (tmp_path / "skill" / "blob.md").write_bytes(b"# Blob\n\xff\xfe\n")
    path = write_spec(tmp_path, "  blob: {path: blob.md, role: policy, load: always}\n")
    report = check_spec(path)
    assert report.structural_ok and not report.files_ok
    assert "valid UTF-8" in report.errors[0].message


def test_symlink_crossing_is_flagged(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "doc.md").write_text("# Doc\n")
    skill = tmp_path / "skill"
    skill.mkdir()
    os.symlink(real, skill / "linked")
    assert crosses_symlink(skill, "linked/doc.md")
    assert not crosses_symlink(real, "doc.md")
    path = write_spec(tmp_path, "  doc: {path: linked/doc.md, role: policy, load: always}\n")
    report = check_spec(path)
    assert report.ok  # a flag, not an error
    assert [d.code for d in report.warnings] == ["crosses_symlink"]


def test_fingerprint_covers_imported_files_in_load_order(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "a.md").write_text("# A\n")
    (skill / "b.md").write_text("# B\n")
    path = write_spec(
        tmp_path,
        "  a: {path: a.md, role: policy, load: always, requires: {imports: [b]}}\n"
        "  b: {path: b.md, role: policy, load: always}\n",
    )
    first = spec_fingerprint(path)
    assert first.startswith("sha256:") and len(first) == 7 + 64
    assert spec_fingerprint(path) == first
    expected = hashlib.sha256(path.read_bytes() + b"# B\n" + b"# A\n").hexdigest()
    assert first == f"sha256:{expected}"
    (skill / "b.md").write_text("# B changed\n")
    assert spec_fingerprint(path) != first
