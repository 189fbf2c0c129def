"""Fuzz surface 1: journal rows, through the committer and through ``harness journal``.

Property: every offered row is either admitted or refused with a field (never
another exception), what the store gains is exactly what was reported admitted
(per-line admission for ``append``; all or nothing for ``import``), and the
refused counter grows by the refusals.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from engine.cli.harness import main as harness
from engine.journal.rows import COLUMNS, RowError, row_from_mapping
from engine.journal.writer import Committer, parse_json_row
from engine.store.db import connect
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import depth_sweep, fuzz_settings, scratch_dir
from tests.fuzz.strategies import (
    DEEPEST,
    NEAR_STRINGS,
    depths,
    json_line,
    json_values,
    nested_json,
    nesting_kinds,
    raw_lines,
    scalars,
)

_DIR = scratch_dir("fuzz-rows-")
_KEYS = st.one_of(st.sampled_from([c for c in COLUMNS if c != "seq"]), st.text(max_size=6))
_TYPES = st.sampled_from(["tool_call", "run_finished", "file_edited", "fact_added", "tick", "x"])

rows = st.fixed_dictionaries(
    {"type": st.one_of(_TYPES, scalars)},
    optional={
        "harness": st.one_of(st.sampled_from(NEAR_STRINGS), json_values),
        "tool": st.one_of(st.just("bash"), json_values),
        "run": st.one_of(st.just("r1"), json_values),
        "outcome": st.one_of(st.sampled_from(["ok", "error"]), json_values),
        "path": st.one_of(st.just("a.py"), json_values),
        "n": json_values,
    },
).flatmap(lambda base: st.dictionaries(_KEYS, json_values, max_size=2).map(lambda x: {**base, **x}))
lines = st.one_of(rows.map(json_line), json_values.map(json_line), raw_lines)


#: Row fields a nested value is put in: identifiers, a path, an integer, an unknown key.
DEEP_FIELDS = ["tool", "harness", "path", "n", "extra"]


def deep_row(field: str, depth: int, kind: str = "list") -> str:
    """A tool_call row (one JSON line) with ``field`` nested ``depth`` deep."""
    return (
        '{"type":"tool_call","harness":"h1","tool":"bash",'
        + f'"{field}":{nested_json(depth, kind)}}}'
    )


def _counts(db: Path, *, ticks: bool = False) -> tuple[int, int]:
    """(rows, refused): ``append`` adds tick rows of its own, so they count only when asked."""
    conn = sqlite3.connect(db)
    try:
        where = "" if ticks else " WHERE kind != 'tick'"
        n = conn.execute("SELECT count(*) FROM rule_journal" + where).fetchone()[0]
        r = conn.execute("SELECT value FROM journal_counters WHERE name = 'refused'").fetchone()
        return int(n), int(r[0]) if r else 0
    finally:
        conn.close()


@fuzz_settings()
@given(lines)
def test_parse_json_row_refuses_or_returns_a_row(line: str) -> None:
    try:
        values = parse_json_row(line, "f.jsonl", 3, with_at=False)
    except RowError as exc:
        assert exc.field and exc.diagnostics[0].location.line == 3
    else:
        assert len(values) == 15


@fuzz_settings(through_store=True)
@given(st.lists(rows, max_size=6))
def test_committer_admits_or_refuses_every_row(batch: list[dict[str, Any]]) -> None:
    db = _DIR / "committer.db"
    conn = connect(db)
    try:
        before, refused_before = _counts(db)
        result = Committer(conn).admit(batch)
    finally:
        conn.close()
    after, refused_after = _counts(db)
    assert result.admitted + len(result.refused) == len(batch)
    assert after - before == result.admitted
    assert refused_after - refused_before == len(result.refused)
    for refusal in result.refused:
        try:
            row_from_mapping(batch[refusal.index], with_at=False)
        except RowError as exc:
            assert exc.field == refusal.field
        else:
            assert refusal.field == "kind"  # a well-formed tick: the committer's alone


@fuzz_settings(through_store=True)
@given(st.lists(lines, min_size=1, max_size=5))
def test_journal_append_admits_good_lines_and_refuses_bad_ones(batch: list[str]) -> None:
    db = _DIR / "append.db"
    if not db.exists():
        connect(db).close()
    before, refused_before = _counts(db)
    stdin = "".join(line.replace("\n", " ") + "\n" for line in batch)
    code, out, err = run_cli(harness, ["journal", "append", "--store", str(db), "--json"], stdin)
    assert_clean(code, out, err)
    after, refused_after = _counts(db)
    if code == 2:  # the whole input was refused before any line (a line over 64 KiB)
        assert "line" in err
        return
    report = json.loads(out)
    assert after - before == report["admitted"]
    assert refused_after - refused_before == len(report["refused"])
    assert report["admitted"] + len(report["refused"]) == sum(1 for x in batch if x.strip())
    assert code == (1 if report["refused"] else 0)


@fuzz_settings(through_store=True)
@given(st.lists(st.one_of(rows, json_values), min_size=1, max_size=4), st.integers(0, 3))
@example([{"type": "tick"}], 1)  # a tick imported is a row stored (the test once left it out)
def test_journal_import_is_all_or_nothing(batch: list[Any], bad_at: int) -> None:
    db = _DIR / "import.db"
    if not db.exists():
        connect(db).close()
    conn = sqlite3.connect(db)
    last = conn.execute("SELECT max(at) FROM rule_journal").fetchone()[0] or 1_767_225_600_000
    conn.close()
    out_lines = []
    for i, row in enumerate(batch):
        if isinstance(row, dict) and i != bad_at:
            row = {**row, "at": last + i}
        out_lines.append(json_line(row))
    src = _DIR / "import.jsonl"
    src.write_text("\n".join(out_lines) + "\n", encoding="utf-8")
    # an import adds no ticks of its own and keeps the file's: every row counts
    before, _ = _counts(db, ticks=True)
    code, out, err = run_cli(harness, ["journal", "import", str(src), "--store", str(db)])
    assert_clean(code, out, err)
    after, _ = _counts(db, ticks=True)
    if code == 0:
        assert after - before == len(batch)
    else:
        assert code == 2 and after == before and "nothing was imported" in err


def test_a_field_at_every_depth_is_refused_with_a_field() -> None:
    """Issue 22's sweep: one field at every depth up to past the recursion limit."""
    for depth in depth_sweep(DEEPEST):
        for field in DEEP_FIELDS:
            for line in (deep_row(field, depth), nested_json(depth, "object")):
                try:
                    parse_json_row(line, "f.jsonl", 3, with_at=False)
                except RowError as exc:
                    assert exc.field and exc.diagnostics[0].location.line == 3
                else:
                    raise AssertionError(f"a nested {field} was admitted at depth {depth}")


@fuzz_settings(through_store=True)
@given(st.sampled_from(DEEP_FIELDS), depths, nesting_kinds, st.booleans())
def test_journal_append_and_import_refuse_a_deep_field(
    field: str, depth: int, kind: str, through_import: bool
) -> None:
    db = _DIR / "deep.db"
    if not db.exists():
        connect(db).close()
    before, refused_before = _counts(db)
    line = deep_row(field, depth, kind)
    if through_import:
        src = _DIR / "deep.jsonl"
        src.write_text(line + "\n", encoding="utf-8")
        code, out, err = run_cli(harness, ["journal", "import", str(src), "--store", str(db)])
        assert_clean(code, out, err)
        assert code == 2 and ":1:" in err and "nothing was imported" in err
        assert _counts(db)[0] == before
    else:
        argv = ["journal", "append", "--store", str(db), "--json"]
        code, out, err = run_cli(harness, argv, line + "\n")
        assert_clean(code, out, err)
        assert code == 1 and json.loads(out)["admitted"] == 0
        assert _counts(db) == (before, refused_before + 1)
