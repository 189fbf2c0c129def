"""Live batches against a shared store: evaluated before the write lock, committed whole.

Serve's journal writer and the evaluator share one store. A batch is
evaluated before its write transaction, so a journal commit never waits for
Python evaluation; what must still hold: hooks that write on a row write inside
the batch's transaction (all or nothing), and an evaluator whose cursor another
evaluator advanced resumes from the store instead of storing a batch twice.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules.evaluation.fires import Fire, list_fires
from engine.rules.evaluation.hooks import DefaultHooks, FireDecision, RowView
from engine.rules.evaluation.live_evaluator import LiveEvaluator, read_batch, read_cursor
from engine.rules.evaluation.window import COLUMNS, ROW_SELECT
from engine.rules.language.model import Rule
from engine.store.db import connect, set_busy_timeout
from engine.store.txn import immediate
from tests.rules.test_evaluator import MIN, T0, insert, make_rule, row

EVERY_RESTART = 'event.type == "restart"'


class _WritesDuringMatch(DefaultHooks):
    """On each match, another connection (another thread) appends a journal row at once."""

    def __init__(self, path: Path, rows: Sequence[tuple[object, ...]]) -> None:
        self.path = path
        self.pending = list(rows)
        self.outcomes: list[str] = []

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        if self.pending:
            new = self.pending.pop(0)
            thread = threading.Thread(target=self._append, args=(new,))
            thread.start()
            thread.join()
        return super().on_match(rule, target, row, now_ms)

    def _append(self, new: tuple[object, ...]) -> None:
        writer = connect(self.path)
        set_busy_timeout(writer, 0)  # no waiting: the lock is free or the write fails
        try:
            with immediate(writer):
                insert(writer, [new])
            self.outcomes.append("committed")
        except sqlite3.OperationalError as exc:
            self.outcomes.append(str(exc))
        finally:
            writer.close()


def test_a_journal_write_is_not_kept_waiting_while_a_batch_is_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = connect(path)
    insert(store, [row(T0 + i * MIN, "restart") for i in range(3)])
    late = [row(T0 + (10 + i) * MIN, "restart") for i in range(3)]
    hooks = _WritesDuringMatch(path, late)
    ev = LiveEvaluator(store, [make_rule("r", EVERY_RESTART, cooldown="0s")], hooks=hooks)

    first = ev.step()

    assert hooks.outcomes == ["committed"] * 3
    assert (first.rows, [f.seq for f in first.fires]) == (3, [1, 2, 3])
    # The rows written meanwhile are evaluated by the next batches, each once.
    ev.run_until_idle()
    assert [f.seq for f in list_fires(store)] == [1, 2, 3, 4, 5, 6]
    assert read_cursor(store)[0] == 6


class _WritesOnTicks(DefaultHooks):
    """Writes a marker through the evaluator's connection on every tick, then fails to commit."""

    row_kinds = frozenset({"tick"})

    def due(self) -> bool:
        return True

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None:
        assert conn is not None
        conn.execute("INSERT INTO rule_counters (name, value) VALUES ('probe', 1)")

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        raise RuntimeError("crash before the cursor")


def test_what_hooks_write_on_a_row_is_part_of_the_batch_transaction(tmp_path: Path) -> None:
    store = connect(tmp_path / "store.db")
    insert(store, [row(T0, "restart"), row(T0 + MIN, "tick"), row(T0 + 2 * MIN, "restart")])
    ev = LiveEvaluator(store, [make_rule("r", EVERY_RESTART)], hooks=_WritesOnTicks())
    with pytest.raises(RuntimeError, match="crash before the cursor"):
        ev.step()
    assert store.execute("SELECT count(*) FROM rule_counters WHERE name = 'probe'").fetchone() == (
        0,
    )
    assert store.execute("SELECT count(*) FROM rule_fires").fetchone() == (0,)
    assert read_cursor(store) == (0, 0)


def test_an_evaluator_overtaken_by_another_resumes_from_the_stored_cursor(
    tmp_path: Path,
) -> None:
    store = connect(tmp_path / "store.db")
    rules = [make_rule("r", EVERY_RESTART, cooldown="0s")]
    late = LiveEvaluator(store, rules)
    assert late.step().rows == 0  # restored at cursor 0
    insert(store, [row(T0 + i * MIN, "restart") for i in range(3)])
    assert [f.seq for f in LiveEvaluator(store, rules).run_until_idle()] == [1, 2, 3]
    insert(store, [row(T0 + (5 + i) * MIN, "restart") for i in range(2)])

    fires = late.run_until_idle()

    assert [f.seq for f in fires] == [4, 5]
    assert [f.seq for f in list_fires(store)] == [1, 2, 3, 4, 5]
    assert late.cursor == read_cursor(store)[0] == 5


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_CLEAN = st.one_of(st.none(), _TEXT, st.integers(min_value=-(2**63), max_value=2**63 - 1))
_AT = st.integers(min_value=0, max_value=2**62)
#: What only a hand-written row holds: JSON cannot carry a BLOB, nor every REAL exactly.
_REAL_ROW = st.tuples(
    st.one_of(_AT, st.floats(0, 1e15)), *[_CLEAN] * 12, st.floats(allow_nan=False)
)
_BLOB_ROW = st.tuples(_AT, *[st.one_of(_CLEAN, st.binary(max_size=4))] * 13)
_ROW = st.one_of(st.tuples(_AT, *[_CLEAN] * 13), _REAL_ROW, _BLOB_ROW)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(_ROW, max_size=30),
    after=st.integers(min_value=0, max_value=40),
    limit=st.integers(min_value=1, max_value=40),
)
def test_a_batch_reads_as_the_row_select_reads_it(
    rows: list[tuple[Any, ...]], after: int, limit: int
) -> None:
    """Whatever the journal holds (hand-written REALs and BLOBs too), a batch reads as fetchall."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE rule_journal (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT,"
        " type TEXT, source TEXT, harness TEXT, project TEXT, run TEXT, tool TEXT,"
        " outcome TEXT, path TEXT, cause_digest TEXT, args_digest TEXT, other_harness TEXT,"
        " fact TEXT, n INTEGER)"
    )
    conn.executemany(
        "INSERT INTO rule_journal (at, kind, type, source, harness, project, run, tool, outcome,"
        " path, cause_digest, args_digest, other_harness, n) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    want = conn.execute(
        ROW_SELECT + " WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
    ).fetchall()
    traced: list[str] = []
    conn.set_trace_callback(traced.append)
    got = read_batch(conn, after, limit)
    conn.set_trace_callback(None)
    assert got == want
    assert [type(v) for r in got for v in r] == [type(v) for r in want for v in r]
    stored = conn.execute(
        "SELECT count(*) FROM rule_journal WHERE seq IN (SELECT seq FROM rule_journal"
        " WHERE seq > ? ORDER BY seq LIMIT ?) AND (typeof(at) = 'real' OR typeof(n) = 'real'"
        " OR " + " OR ".join(f"typeof({c}) = 'blob'" for c in COLUMNS[2:]) + ")",
        (after, limit),
    ).fetchone()[0]
    if not stored:  # nothing JSON cannot carry: one statement read the whole batch
        assert len(traced) == 1, traced
