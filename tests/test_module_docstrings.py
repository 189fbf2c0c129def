"""Every module of engine/ and console/ opens with a one-line docstring saying what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p for package in ("engine", "console") for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_docstring_first_line(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    assert doc and doc.strip(), "missing module docstring"
    lines = doc.strip().splitlines()
    first = lines[0]
    assert len(first) <= 100, f"first line is {len(first)} characters"
    assert len(lines) == 1 or not lines[1].strip(), "first line runs on; end it with a blank line"
    words = first.strip("`. ").replace("``", "")
    assert words not in (path.stem, path.name), "first line only names the module"
