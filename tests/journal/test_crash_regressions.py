"""Fuzz-found journal crashes (issue 13, items 1 and 2), checked in-process.

Each input used to raise a Python exception other than :class:`RowError`
(``TypeError: unhashable``, ``RecursionError``, ``ValueError`` from the int
digit limit); each must now be a refusal naming the field or the line.
"""

from __future__ import annotations

import pytest

from engine.journal.rows import RowError, row_from_mapping
from engine.journal.writer import Committer, parse_json_row
from engine.jsontext import JsonTextError, dumps, loads
from engine.store.db import connect


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"type": "tool_call", "harness": {}, "tool": "t"}, "harness"),
        ({"type": "tool_call", "harness": "h", "tool": ["x"]}, "tool"),
        ({"type": "run_finished", "harness": "h", "run": "r", "outcome": []}, "outcome"),
        ({"type": "run_finished", "harness": "h", "run": "r", "outcome": {}}, "outcome"),
        ({"type": "verify_failed", "harness": "h", "cause_digest": {"a": 1}}, "cause_digest"),
        ({"type": "file_edited", "harness": "h", "path": []}, "path"),
        ({"type": "fact_added", "fact": {}}, "fact"),
    ],
)
def test_a_container_in_a_field_is_refused_naming_it(row: dict[str, object], field: str) -> None:
    with pytest.raises(RowError) as caught:
        row_from_mapping(row, with_at=False)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested deeper"),
        ('{"type": "tool_call", "n": ' + "9" * 5_000 + "}", "5000 digits"),
        ('{"type": "tool_call", "harness": ' + "[" * 500 + "]" * 500 + "}", "nested deeper"),
    ],
)
def test_hostile_json_lines_are_refused_at_their_line(line: str, needle: str) -> None:
    with pytest.raises(RowError) as caught:
        parse_json_row(line, "in.jsonl", 7, with_at=False)
    assert needle in caught.value.problem
    assert caught.value.diagnostics[0].location.line == 7


def test_refusals_through_the_committer_leave_good_rows_admitted(tmp_path: object) -> None:
    conn = connect(f"{tmp_path}/j.db")
    try:
        result = Committer(conn).admit(
            [
                {"type": "tool_call", "harness": "h", "tool": "t"},
                {"type": "tool_call", "harness": {}, "tool": "t"},
                {"type": "run_finished", "harness": "h", "run": "r", "outcome": []},
            ]
        )
    finally:
        conn.close()
    assert result.admitted == 1
    assert [(r.index, r.field) for r in result.refused] == [(1, "harness"), (2, "outcome")]


def test_jsontext_refuses_what_json_loads_crashes_on() -> None:
    for text in ("[" * 5_000 + "]" * 5_000, "1" * 5_000, '{"a": ' + "[" * 100 + "]" * 100 + "}"):
        with pytest.raises(JsonTextError):
            loads(text)
    assert loads('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


def test_dumps_escapes_lone_surrogates_into_valid_utf8_json() -> None:
    text = dumps({"\ud800": ["\udfff", "é"]})
    text.encode("utf-8")  # would raise UnicodeEncodeError before the fix
    assert loads(text) == {"\ud800": ["\udfff", "é"]}
    assert "é" in text  # non-ASCII text is still written as itself
