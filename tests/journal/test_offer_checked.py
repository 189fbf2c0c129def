"""A batch offered already checked keeps its order, and a full queue drops its whole remainder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.journal.queue import JournalWriter
from engine.journal.reader import journal_stats
from engine.journal.rows import INSERT_COLUMNS, InsertRow, check_values
from engine.journal.writer import Committer
from engine.store.db import connect


def checked(harness: str, i: int) -> InsertRow:
    """A tool_call insert tuple (``at`` 0), checked as serve's mapper checks its rows."""
    row = (0, "run_event", "tool_call", "observer", harness, "atlas", f"r{i}", "Bash", "ok")
    row += (None,) * 6
    check_values(row)
    return row


def stored(store: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        cols = ", ".join(INSERT_COLUMNS[1:])
        return conn.execute(f"SELECT {cols} FROM rule_journal ORDER BY seq").fetchall()
    finally:
        conn.close()


def test_runs_and_single_offers_are_admitted_in_offer_order(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    # batch 7: runs of 5 are split across transactions, which must not reorder them
    writer = JournalWriter(store, capacity=1_000, batch=7, ticks=False)
    expected: list[InsertRow] = []
    for b in range(6):
        run = [checked("h1", b * 10 + i) for i in range(5)]
        assert writer.offer_checked(run) == 5
        expected += run
        single = {"type": "tool_call", "harness": "h2", "tool": "Bash", "run": f"s{b}"}
        assert writer.offer(single)
        expected.append((0, "run_event", "tool_call", "observer", "h2", None, f"s{b}", "Bash"))
    writer.start()
    stats = writer.close()
    assert (stats.offered, stats.admitted, stats.dropped, stats.refused) == (36, 36, 0, 0)
    rows = stored(store)
    assert [r[:7] for r in rows] == [tuple(e[1:8]) for e in expected]
    assert stats.batches >= 36 // 7


def test_a_full_queue_queues_the_first_rows_and_drops_the_whole_remainder(
    tmp_path: Path,
) -> None:
    store = tmp_path / "j.db"
    writer = JournalWriter(store, capacity=10, ticks=False)  # not started: nothing drains
    for i in range(4):
        assert writer.offer({"type": "tool_call", "harness": "h1", "tool": "Bash", "run": f"a{i}"})
    run = [checked("h2", i) for i in range(10)]
    assert writer.offer_checked(run) == 6
    assert writer.offer_checked([checked("h3", 0)]) == 0  # full: all dropped
    assert writer.offer({"type": "tool_call", "harness": "h4", "tool": "Bash"}) is False
    writer.start()
    stats = writer.close()
    assert (stats.offered, stats.admitted, stats.dropped) == (16, 10, 6)
    rows = stored(store)
    assert [r[3] for r in rows] == ["h1"] * 4 + ["h2"] * 6
    assert [r[5] for r in rows[4:]] == [f"r{i}" for i in range(6)]  # the first six, in order
    for row in rows:  # every stored row whole: no column missing from a half-taken row
        assert row[:8] == (
            "run_event",
            "tool_call",
            "observer",
            row[3],
            row[4],
            row[5],
            "Bash",
            row[7],
        )
    js = journal_stats(connect(store, readonly=True), store)
    assert (js.rows, js.dropped) == (10, 6)


def test_offers_after_close_drop_every_row(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "j.db", ticks=False)
    writer.start()
    writer.close()
    assert writer.offer_checked([checked("h1", 0), checked("h1", 1)]) == 0
    assert writer.stats().dropped == 2


def test_checked_rows_skip_the_committers_check_and_single_rows_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared: list[object] = []
    original = Committer.prepare

    def spy(self: Committer, rows: list[object]) -> object:
        prepared.extend(rows)
        return original(self, rows)

    monkeypatch.setattr(Committer, "prepare", spy)
    bad = {"type": "tool_call", "harness": "not an id", "tool": "Bash"}
    writer = JournalWriter(tmp_path / "j.db", ticks=False)
    writer.offer_checked([checked("h1", i) for i in range(3)])
    writer.offer(bad)
    writer.start()
    stats = writer.close()
    assert prepared == [bad]
    assert (stats.admitted, stats.refused) == (3, 1)
