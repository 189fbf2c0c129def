"""Reading the journal: committed rows after a ``seq``, following, stats, pruning.

Readers only ever see whole batches (each is one transaction) and rows come
back in ``seq`` order, which is the only order (seed 004). Rows are plain
tuples in :data:`engine.journal.rows.COLUMNS` order, because the evaluator and
the console read millions of them; :func:`engine.journal.rows.row_dict` turns
one into a dict for display.

Pruning deletes rows older than the retention (default 45 days from
harness.toml ``[store] retention_days``) in small transactions of
:data:`PRUNE_CHUNK` rows, so a live writer waits at most one small delete for
the lock. ``seq`` never restarts after a prune: the committer keeps its
high-water marks in ``journal_counters``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.journal.rows import COLUMNS
from engine.journal.writer import read_counters
from engine.store.txn import immediate

DAY_MS = 86_400_000
PRUNE_CHUNK = 5_000
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM rule_journal"

Row = tuple[Any, ...]


def read_after(conn: sqlite3.Connection, after_seq: int, limit: int = 10_000) -> list[Row]:
    """Up to ``limit`` committed rows with seq > ``after_seq``, in seq order."""
    return conn.execute(
        f"{_SELECT} WHERE seq > ? ORDER BY seq LIMIT ?", (after_seq, limit)
    ).fetchall()


def iter_rows(
    conn: sqlite3.Connection,
    after_seq: int = 0,
    *,
    until_seq: int | None = None,
    batch: int = 10_000,
) -> Iterator[Row]:
    """Every committed row after ``after_seq`` (up to ``until_seq``), in seq order, in batches."""
    cursor = after_seq
    while True:
        rows = read_after(conn, cursor, batch)
        for row in rows:
            if until_seq is not None and row[0] > until_seq:
                return
            yield row
        if len(rows) < batch:
            return
        cursor = rows[-1][0]


def follow(
    conn: sqlite3.Connection,
    after_seq: int = 0,
    *,
    poll_s: float = 0.2,
    batch: int = 10_000,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[Row]:
    """Rows after ``after_seq`` as they are committed, until ``stop()`` is true."""
    cursor = after_seq
    while not stop():
        rows = read_after(conn, cursor, batch)
        if rows:
            cursor = rows[-1][0]
            yield from rows
        if len(rows) < batch:
            time.sleep(poll_s)


def last_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(seq) FROM rule_journal").fetchone()
    return int(row[0] or 0)


def tail_start(conn: sqlite3.Connection, n: int) -> int:
    """The seq after which the last ``n`` rows begin."""
    row = conn.execute(
        "SELECT seq FROM rule_journal ORDER BY seq DESC LIMIT 1 OFFSET ?", (n,)
    ).fetchone()
    return int(row[0]) if row else 0


def seq_at_or_after(conn: sqlite3.Connection, at: int) -> int | None:
    """The first seq whose row has at >= ``at`` (binary search: ``at`` is monotonic in seq)."""
    bounds = conn.execute("SELECT min(seq), max(seq) FROM rule_journal").fetchone()
    if bounds[0] is None:
        return None
    first_from = "SELECT seq, at FROM rule_journal WHERE seq >= ? ORDER BY seq LIMIT 1"
    lo, hi = int(bounds[0]), int(bounds[1]) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        row = conn.execute(first_from, (mid,)).fetchone()
        if row is None or row[1] >= at:
            hi = mid
        else:
            lo = int(row[0]) + 1
    found = conn.execute(first_from, (lo,)).fetchone()
    return int(found[0]) if found else None


@dataclass(frozen=True, slots=True)
class JournalStats:
    """What ``harness journal stats`` shows (and doctor/metrics read)."""

    rows: int
    by_type: dict[str, dict[str, int]]
    first_seq: int | None
    last_seq: int | None
    first_at: int | None
    last_at: int | None
    dropped: int
    refused: int
    pruned: int
    file_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "by_kind": {k: sum(v.values()) for k, v in self.by_type.items()},
            "by_type": self.by_type,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_at": self.first_at,
            "last_at": self.last_at,
            "dropped": self.dropped,
            "refused": self.refused,
            "pruned": self.pruned,
            "file_bytes": self.file_bytes,
        }


def store_file_bytes(path: str | Path) -> int:
    """Size of the database plus its WAL and shared-memory files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(f"{path}{suffix}")
    return total


def journal_stats(conn: sqlite3.Connection, path: str | Path | None = None) -> JournalStats:
    by_type: dict[str, dict[str, int]] = {}
    total = 0
    for kind, typ, count in conn.execute(
        "SELECT kind, type, count(*) FROM rule_journal GROUP BY type ORDER BY kind, type"
    ):
        by_type.setdefault(kind, {})[typ] = int(count)
        total += int(count)
    first = conn.execute("SELECT seq, at FROM rule_journal ORDER BY seq LIMIT 1").fetchone()
    last = conn.execute("SELECT seq, at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
    counters = read_counters(conn)
    return JournalStats(
        rows=total,
        by_type=by_type,
        first_seq=first[0] if first else None,
        last_seq=last[0] if last else None,
        first_at=first[1] if first else None,
        last_at=last[1] if last else None,
        dropped=counters.get("dropped", 0),
        refused=counters.get("refused", 0),
        pruned=counters.get("pruned", 0),
        file_bytes=store_file_bytes(path) if path is not None else 0,
    )


@dataclass(frozen=True, slots=True)
class PruneResult:
    deleted: int
    cutoff_at: int
    transactions: int
    longest_txn_ms: float


def prune(
    conn: sqlite3.Connection,
    *,
    days: int,
    now_ms: int | None = None,
    chunk: int = PRUNE_CHUNK,
) -> PruneResult:
    """Delete rows with at < now - ``days`` in transactions of at most ``chunk`` rows.

    ``now_ms`` defaults to the journal's last ``at`` (journal time, so a replayed
    or simulated store prunes relative to its own history, not the wall clock).
    """
    if days < 1:
        raise ValueError("retention must be at least one day")
    if now_ms is None:
        row = conn.execute("SELECT at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
        now_ms = int(row[0]) if row else 0
    cutoff = now_ms - days * DAY_MS
    boundary = seq_at_or_after(conn, cutoff)
    first = conn.execute("SELECT min(seq) FROM rule_journal").fetchone()[0]
    if first is None:
        return PruneResult(0, cutoff, 0, 0.0)
    end = boundary if boundary is not None else last_seq(conn) + 1  # delete seq < end
    deleted = txns = 0
    longest = 0.0
    lo = int(first)
    while lo < end:
        hi = min(lo + chunk, end)
        t0 = time.perf_counter()
        with immediate(conn):
            cur = conn.execute("DELETE FROM rule_journal WHERE seq >= ? AND seq < ?", (lo, hi))
            n = cur.rowcount
            conn.execute(
                "INSERT INTO journal_counters (name, value) VALUES ('pruned', ?) "
                "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                (n,),
            )
        longest = max(longest, (time.perf_counter() - t0) * 1000)
        deleted += n
        txns += 1
        lo = hi
    return PruneResult(deleted, cutoff, txns, longest)
