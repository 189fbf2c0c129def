"""No function of engine/ or console/ runs over 100 lines (issue 20): a longer one is split by step.

The same measure as the project's before-stop check (``def`` line to last
line, decorators aside).
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT

MAX_LINES = 100


def test_no_function_is_over_100_lines() -> None:
    long = []
    for package in ("engine", "console"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert long == []
