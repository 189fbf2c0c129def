"""Journal benchmarks: admission throughput, the 45-day demo fleet, the flood.

- Admission: rows/s through :class:`Committer` (checked JSON-like rows, batches
  of 5,000, one transaction each) and through the queued :class:`JournalWriter`;
  baseline: the naive one INSERT + one COMMIT per row, measured in this run.
- Demo fleet: time and file size to write the 45-day default fleet (2 days
  when quick); target <= 90 s for 45 days.
- Flood: offering 10x the queue capacity; worst single ``offer`` in ms.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from engine.fleet.sim import DAY_MS, write_fleet
from engine.journal.queue import JournalWriter
from engine.journal.reader import store_file_bytes
from engine.journal.writer import Committer
from engine.store.db import connect
from tests.benchmarks._common import Row

DIGEST = "sha256:" + "ab" * 32


def _row(i: int) -> dict[str, object]:
    return {
        "type": "tool_call",
        "harness": f"h{i % 12:02d}",
        "project": "atlas",
        "run": f"r{i // 200}",
        "tool": "bash",
        "outcome": "ok",
        "path": f"src/atlas/m{i % 50}.py",
        "args_digest": DIGEST,
    }


def _naive(path: Path, n: int) -> float:
    conn = connect(path)
    row = ("run_event", "tool_call", "observer", "h1", "atlas", "r1", "bash", "ok", "a.py",
           None, DIGEST, None, None, None)  # fmt: skip
    sql = (
        "INSERT INTO rule_journal (at, kind, type, source, harness, project, run, tool, outcome,"
        " path, cause_digest, args_digest, other_harness, fact, n) VALUES "
        "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    )
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, (i, *row))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return n / elapsed


def _committer(path: Path, n: int, batch: int = 5_000) -> float:
    conn = connect(path)
    committer = Committer(conn)
    rows = [_row(i) for i in range(n)]
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        committer.admit(rows[start : start + batch])
    elapsed = time.perf_counter() - t0
    conn.close()
    return n / elapsed


def _queued(path: Path, n: int) -> float:
    rows = [_row(i) for i in range(n)]
    t0 = time.perf_counter()
    with JournalWriter(path, capacity=n, batch=5_000) as writer:
        for row in rows:
            writer.offer(row)
    elapsed = time.perf_counter() - t0
    assert writer.stats().admitted == n
    return n / elapsed


def _flood(path: Path, capacity: int) -> tuple[float, float, int, int, int]:
    """(p99.9 ms, worst ms, offered, admitted, dropped) for 10x capacity offers."""
    row = _row(1)
    durations = []
    writer = JournalWriter(path, capacity=capacity, batch=1_000, ticks=False)
    writer.start()
    for _ in range(10 * capacity):
        t0 = time.perf_counter()
        writer.offer(row)
        durations.append(time.perf_counter() - t0)
    stats = writer.close()
    durations.sort()
    p999 = durations[int(len(durations) * 0.999)] * 1000
    return p999, durations[-1] * 1000, stats.offered, stats.admitted, stats.dropped


def _fleet(path: Path, days: int) -> tuple[float, int, int]:
    conn = connect(path)
    start = (1_767_225_600_000 // DAY_MS) * DAY_MS
    t0 = time.perf_counter()
    result = write_fleet(conn, days=days, start_ms=start)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed, result.admitted, store_file_bytes(path)


def run(quick: bool) -> list[Row]:
    n = 50_000 if quick else 300_000
    naive_n = 2_000 if quick else 10_000
    days = 2 if quick else 45
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        naive = _naive(d / "naive.db", naive_n)
        rate = _committer(d / "committer.db", n)
        rows.append(Row("journal admission, one writer (Committer)", rate, "rows/s",
                        target=50_000, baseline=naive,
                        note=f"{n:,} checked rows in batches of 5,000; baseline: one INSERT + "
                        f"COMMIT per row = {naive:,.0f} rows/s"))  # fmt: skip
        queued = _queued(d / "queued.db", n)
        rows.append(Row("journal admission via the dropping queue", queued, "rows/s",
                        target=50_000, baseline=naive))  # fmt: skip
        p999, worst, offered, admitted, dropped = _flood(d / "flood.db", 10_000)
        exact = offered - admitted == dropped
        note = (
            f"worst {worst:.1f} ms (OS scheduling of the GIL holder on a loaded machine); "
            f"offered {offered:,}, admitted {admitted:,}, dropped {dropped:,} (exact: {exact})"
        )
        rows.append(Row("journal flood: offer() p99.9", p999, "ms", target=5,
                        higher_is_better=False, note=note))  # fmt: skip
        elapsed, count, size = _fleet(d / "fleet.db", days)
        per_row = size / max(count, 1)
        note = f"{count:,} rows, {count / elapsed:,.0f} rows/s, {per_row:.0f} B/row"
        rows.append(Row(f"demo fleet, {days} days, 12 harnesses", elapsed, "s",
                        target=90 * days / 45, higher_is_better=False, note=note))  # fmt: skip
        rows.append(Row(f"demo fleet file size, {days} days", size / 1e6, "MB"))
        check = sqlite3.connect(d / "fleet.db")
        assert check.execute("SELECT count(*) FROM rule_journal").fetchone()[0] == count
        check.close()
    return rows
