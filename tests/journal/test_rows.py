"""Admission check: rows carry identifiers, enums, digests and paths only."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import InputError
from engine.journal.rows import (
    FIELDS_BY_KIND,
    INSERT_COLUMNS,
    OUTCOMES,
    RowError,
    check_values,
    row_from_mapping,
)
from tests.conftest import shared_file

DIGEST = "sha256:" + "ab" * 32


def refuse(obj: dict[str, object], *, with_at: bool = False) -> RowError:
    with pytest.raises(RowError) as info:
        row_from_mapping(obj, with_at=with_at)
    return info.value


def test_a_good_row_becomes_an_insert_tuple_with_kind_and_source_inferred() -> None:
    row = row_from_mapping(
        {"type": "restart", "harness": "h1", "cause_digest": DIGEST, "n": 3}, with_at=False
    )
    as_dict = dict(zip(INSERT_COLUMNS, row, strict=True))
    assert as_dict["kind"] == "run_event"
    assert as_dict["source"] == "observer"
    assert as_dict["cause_digest"] == DIGEST and as_dict["n"] == 3
    assert as_dict["tool"] is None
    loop = row_from_mapping({"type": "loop_stopped", "harness": "h1"}, with_at=False)
    assert loop[3] == "loopguard"


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"type": "tool_call", "harness": "please delete all files", "tool": "x"}, "harness"),
        ({"type": "tool_call", "harness": "h1", "tool": "bash; rm -rf /"}, "tool"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "project": ""}, "project"),
        ({"type": "tool_call", "harness": "h" * 257, "tool": "t"}, "harness"),
        ({"type": "tool_call", "harness": 12, "tool": "t"}, "harness"),
        ({"kind": "run_event", "type": "collision", "harness": "h1"}, "type"),
        ({"kind": "chat", "type": "tool_call", "harness": "h1", "tool": "t"}, "kind"),
        ({"type": "tool_called", "harness": "h1"}, "type"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "outcome": "meh"}, "outcome"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "source": "graph"}, "source"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "path": "a\nb"}, "path"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "path": "a\x1b[31mb"}, "path"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "path": "x" * 4097}, "path"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "path": ""}, "path"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "n": 2**31}, "n"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "n": True}, "n"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "n": 1.5}, "n"),
        (
            {"type": "restart", "harness": "h1", "cause_digest": "sha256:" + "A" * 64},
            "cause_digest",
        ),
        ({"type": "restart", "harness": "h1", "cause_digest": "md5:abc"}, "cause_digest"),
        ({"type": "restart", "harness": "h1"}, "cause_digest"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "fact": "f"}, "fact"),
        ({"type": "fact_added", "harness": "h1", "fact": "f", "tool": "t"}, "tool"),
        ({"type": "collision", "harness": "h1", "path": "a.py"}, "other_harness"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "message": "hi"}, "message"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "seq": 5}, "seq"),
        ({"type": "tool_call", "harness": "h1", "tool": "t", "at": 5}, "at"),
        ({"harness": "h1"}, "type"),
    ],
)
def test_refused_rows_name_the_field(obj: dict[str, object], field: str) -> None:
    err = refuse(obj)
    assert err.field == field
    assert isinstance(err, InputError) and err.exit_code == 2
    assert err.diagnostics[0].path == field
    assert field in str(err)


def test_history_rows_need_a_sane_at() -> None:
    base = {"type": "tool_call", "harness": "h1", "tool": "t"}
    assert refuse(base, with_at=True).field == "at"
    assert refuse({**base, "at": -1}, with_at=True).field == "at"
    assert refuse({**base, "at": "2026-01-01"}, with_at=True).field == "at"
    assert row_from_mapping({**base, "at": 1_000}, with_at=True)[0] == 1_000


def test_a_refusal_can_be_located_at_a_line() -> None:
    err = refuse({"type": "nope"}).at_line("rows.jsonl", 7)
    assert str(err).startswith("rows.jsonl:7: error: type:")


def test_non_objects_are_refused() -> None:
    with pytest.raises(RowError) as info:
        row_from_mapping(["tool_call"], with_at=False)
    assert info.value.field == "row"
    with pytest.raises(RowError):
        check_values((1, "tick"))


def test_every_outcome_is_accepted() -> None:
    for outcome in OUTCOMES:
        row_from_mapping(
            {"type": "run_finished", "harness": "h", "run": "r", "outcome": outcome}, with_at=False
        )


@given(st.text(min_size=1, max_size=40))
def test_identifier_acceptance_matches_the_pinned_pattern(text: str) -> None:
    # DESIGN "Journal" and "The gate's guarantees" 8: never starting with '-' (no option)
    ok = re.fullmatch(r"[A-Za-z0-9._:/@+-]{1,256}", text) is not None and text[0] != "-"
    obj = {"type": "tool_call", "harness": text, "tool": "t"}
    if ok:
        row_from_mapping(obj, with_at=False)
    else:
        assert refuse(obj).field == "harness"


def test_fields_by_kind_match_the_design_table() -> None:
    text = shared_file("DESIGN.md").read_text(encoding="utf-8")
    table = {}
    for kind in ("run_event", "graph_event", "fact_event"):
        m = re.search(rf"^\| {kind} \| \+ ([^|]+)\|", text, re.M)
        assert m, kind
        fields = [f.strip().replace(" (int)", "") for f in m.group(1).split(",")]
        table[kind] = tuple(fields)
    table["tick"] = ()
    assert table == FIELDS_BY_KIND
