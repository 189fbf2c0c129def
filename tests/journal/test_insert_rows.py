"""Multi-row inserts store exactly the rows given, in order, whatever the batch size."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.journal import writer
from engine.journal.rows import INSERT_COLUMNS
from engine.journal.writer import Committer, insert_rows
from engine.store.txn import immediate
from tests.journal._util import T0, FakeClock, all_rows, store, tool_call

_TEXT = st.one_of(st.none(), st.text(min_size=1, max_size=8))


@st.composite
def _rows(draw: st.DrawFn) -> list[tuple[object, ...]]:
    n = draw(st.integers(min_value=0, max_value=700))
    values = draw(st.lists(_TEXT, min_size=1, max_size=5))
    width = len(INSERT_COLUMNS) - 5  # at, kind, type, source and n are set below
    return [
        (
            seq,
            T0 + seq,
            "run_event",
            "tool_call",
            "observer",
            *(values[(seq + j) % len(values)] for j in range(width)),
            seq % 7,
        )
        for seq in range(1, n + 1)
    ]


@settings(max_examples=40, deadline=None)
@given(rows=_rows())
def test_every_row_stored_once_in_order(rows: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _, conn = store(Path(tmp))
        with immediate(conn):
            insert_rows(conn, rows)
        assert all_rows(conn) == rows
        conn.close()


def test_a_batch_takes_few_statements_and_few_texts(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    rows = [(seq, T0, "run_event", "tool_call", "observer", *[None] * 11) for seq in range(1, 101)]
    with immediate(conn):
        insert_rows(conn, rows)
    inserts = [t for t in traced if t.startswith("INSERT OR ROLLBACK INTO rule_journal")]
    assert [t.count("),(") + 1 for t in inserts] == [64, 32, 4]  # not one step per row
    assert len(all_rows(conn)) == 100
    # 1..600 rows use at most log2(256) + 1 statement texts, so they stay prepared
    writer._CHUNK_SQL.clear()
    for n in range(1, 601):
        with immediate(conn):
            conn.execute("DELETE FROM rule_journal")
            insert_rows(conn, [(s, *rows[0][1:]) for s in range(1, n + 1)])
    assert len(writer._CHUNK_SQL) <= 9


def test_a_refused_chunk_leaves_nothing_behind(tmp_path: Path) -> None:
    """A duplicate seq in the last chunk of a batch: the batch's earlier chunks go too."""
    _, conn = store(tmp_path)
    committer = Committer(conn, clock=FakeClock(), ticks=False)
    committer.admit([tool_call()])
    before = all_rows(conn)
    rows = [(seq, T0, "run_event", "tool_call", "observer", *[None] * 11) for seq in range(2, 70)]
    rows.append((1, T0, "run_event", "tool_call", "observer", *[None] * 11))
    try:
        with immediate(conn):
            insert_rows(conn, rows)
    except sqlite3.IntegrityError:
        pass
    else:
        raise AssertionError("a duplicate seq was stored")
    assert all_rows(conn) == before
    # The refused statement ended the transaction; the connection and its lock carry on.
    assert not conn.in_transaction
    assert committer.admit([tool_call()]).last_seq == 2
