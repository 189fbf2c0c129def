"""The parse reports how deep a document nests, so the structure check need not walk it again.

``YamlDocument.depth`` must be the nesting ``_deeper_than`` would find (the
root mapping or sequence at 1), and ``check_structure`` must report the same
diagnostics whether it is given that depth or walks the document itself.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.skillspec.structure import MAX_NESTING, _deeper_than, check_structure
from engine.yamlsrc import parse_yaml

TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=3)
VALUES = st.recursive(
    st.none() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=30,
)


def nesting(value: Any, depth: int = 1) -> int:
    if not isinstance(value, dict | list):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return max([depth, *(nesting(c, depth + 1) for c in children)])


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_depth_is_the_nesting_the_walk_finds(value: Any) -> None:
    doc = parse_yaml(json.dumps(value))
    assert doc.depth == nesting(value)
    if isinstance(doc.data, dict | list):
        for limit in range(6):
            assert (_deeper_than(doc.data, limit) is None) == (doc.depth <= limit)


def test_structure_verdicts_agree_with_and_without_the_depth() -> None:
    for levels in (3, MAX_NESTING - 2, MAX_NESTING, MAX_NESTING + 3):
        inner: Any = "leaf"
        for _ in range(levels - 1):
            inner = [inner]
        text = json.dumps({"schema": "skillspec/v0", "id": "x", "metadata": {"deep": inner}})
        doc = parse_yaml(text, "s.yml")
        given_depth = check_structure(doc.data, text, "s.yml", doc.depth)
        walked = check_structure(doc.data, text, "s.yml")
        assert given_depth == walked
        assert any(d.code == "nesting" for d in walked) == (doc.depth > MAX_NESTING)
