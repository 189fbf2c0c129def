"""The queue drops rather than blocks, and counts every drop exactly."""

from __future__ import annotations

import time
from pathlib import Path

from engine.journal.queue import JournalWriter
from engine.journal.reader import journal_stats
from engine.store.db import connect


def test_flooding_ten_times_the_capacity_never_blocks_and_counts_drops(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    capacity = 2_000
    row = {"type": "tool_call", "harness": "h1", "tool": "bash"}
    writer = JournalWriter(store, capacity=capacity, batch=500, ticks=False)
    writer.start()
    offered = 10 * capacity
    accepted = 0
    worst = 0.0
    durations = []
    for _ in range(offered):
        t0 = time.perf_counter()
        ok = writer.offer(row)
        took = time.perf_counter() - t0
        durations.append(took)
        worst = max(worst, took)
        accepted += ok
    stats = writer.close()
    durations.sort()
    # Never a store-sized wait: the worst offer is one GIL hand-over, not a commit.
    assert durations[len(durations) // 2] < 0.001
    assert worst < 0.050, f"an offer blocked {worst * 1000:.1f} ms"
    assert stats.offered == offered
    assert stats.dropped > 0, "the flood should have overflowed the queue"
    assert stats.dropped == offered - stats.admitted
    assert stats.admitted == accepted
    conn = connect(store, readonly=True)
    js = journal_stats(conn, store)
    assert js.rows == stats.admitted
    assert js.dropped == stats.dropped


def test_offers_never_wait_for_a_locked_store(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    capacity = 1_000
    writer = JournalWriter(store, capacity=capacity, batch=100, ticks=False)
    blocker = connect(store)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    writer.start()
    t0 = time.perf_counter()
    results = [writer.offer({"type": "tool_call", "harness": "h1", "tool": "t"})
               for _ in range(10 * capacity)]  # fmt: skip
    offering = time.perf_counter() - t0
    blocker.execute("COMMIT")
    stats = writer.close()
    # The committer waits on the lock (busy timeout); the writers do not.
    assert offering < 1.0, f"10,000 offers took {offering:.2f} s against a locked store"
    assert sum(results) <= capacity + 100
    assert stats.dropped == 10 * capacity - sum(results)
    assert stats.admitted == sum(results)


def test_bad_rows_offered_are_refused_and_counted_not_raised(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    with JournalWriter(store, ticks=False) as writer:
        assert writer.offer({"type": "tool_call", "harness": "h1", "tool": "bash"})
        assert writer.offer({"type": "tool_call", "harness": "rm -rf", "tool": "bash"})
    stats = writer.stats()
    assert (stats.admitted, stats.refused, stats.dropped) == (1, 1, 0)
    js = journal_stats(connect(store, readonly=True), store)
    assert (js.rows, js.refused) == (1, 1)


def test_offers_after_close_are_dropped(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    writer = JournalWriter(store, ticks=False)
    writer.start()
    writer.close()
    assert writer.offer({"type": "tool_call", "harness": "h1", "tool": "bash"}) is False
    assert writer.stats().dropped == 1
