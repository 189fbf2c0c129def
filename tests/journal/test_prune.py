"""Retention: old rows go in small transactions; seq and at survive."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine.journal.reader import DAY_MS, journal_stats, prune, seq_at_or_after
from engine.journal.writer import Committer
from engine.store.db import connect
from tests.journal._util import T0, FakeClock, all_rows, store, tool_call

HOUR = 3_600_000


def _history(conn, hours: int, per_hour: int) -> None:  # type: ignore[no-untyped-def]
    rows = [
        (T0 + h * HOUR + i, "run_event", "tool_call", "observer", "h1", None, None, "t",
         *[None] * 7)
        for h in range(hours)
        for i in range(per_hour)
    ]  # fmt: skip
    Committer(conn).import_history(rows)


def test_seq_at_or_after_finds_the_first_row_at_a_time(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    _history(conn, 10, 3)
    ats = {r[0]: r[1] for r in all_rows(conn)}
    for probe in (T0 - 5, T0, T0 + 1, T0 + 3 * HOUR, T0 + 3 * HOUR + 2, T0 + 9 * HOUR + 2):
        expected = min((s for s, a in ats.items() if a >= probe), default=None)
        assert seq_at_or_after(conn, probe) == expected
    assert seq_at_or_after(conn, T0 + 10 * HOUR) is None


def test_prune_deletes_only_rows_older_than_retention_in_small_chunks(tmp_path: Path) -> None:
    path, conn = store(tmp_path)
    _history(conn, 24 * 4, 100)  # four days, 9,600 rows
    last_at = T0 + (24 * 4 - 1) * HOUR + 99
    result = prune(conn, days=2, chunk=1_000)
    cutoff = last_at - 2 * DAY_MS
    assert result.cutoff_at == cutoff
    remaining = all_rows(conn)
    assert min(r[1] for r in remaining) >= cutoff
    expected_deleted = sum(1 for h in range(96) for i in range(100) if T0 + h * HOUR + i < cutoff)
    assert result.deleted == expected_deleted
    assert result.transactions == -(-expected_deleted // 1_000)
    assert journal_stats(conn, path).pruned == expected_deleted
    # seq continues after a prune.
    clock = FakeClock(last_at + 10)
    assert Committer(conn, clock=clock, ticks=False).admit([tool_call()]).first_seq == 9_601


def test_pruning_everything_keeps_seq_and_at(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    _history(conn, 3, 10)
    assert prune(conn, days=1, now_ms=T0 + 10 * DAY_MS).deleted == 30
    assert all_rows(conn) == []
    result = Committer(conn, clock=FakeClock(T0), ticks=False).admit([tool_call()])
    assert result.first_seq == 31
    assert result.at == T0 + 2 * HOUR + 9  # never before the last admitted at


def test_prune_refuses_a_zero_retention(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    with pytest.raises(ValueError):
        prune(conn, days=0)


def test_a_writer_keeps_committing_while_prune_runs(tmp_path: Path) -> None:
    path, conn = store(tmp_path)
    _history(conn, 24 * 3, 1_000)  # 72,000 rows
    waits: list[float] = []
    stop = threading.Event()

    def write() -> None:
        wconn = connect(path)
        c = Committer(wconn, ticks=False)
        while not stop.is_set():
            t0 = time.perf_counter()
            c.admit([tool_call()])
            waits.append(time.perf_counter() - t0)
        wconn.close()

    thread = threading.Thread(target=write)
    thread.start()
    result = prune(conn, days=1, chunk=5_000)
    stop.set()
    thread.join()
    assert result.deleted > 40_000 and result.transactions >= 9
    assert waits, "the writer never got the lock"
    # Every writer commit waited for at most a few chunk deletes, never the whole prune.
    assert max(waits) < 2.0
