"""The Timeline pane's model: harness x time bucket, the worst level fired, holds as spans.

Why it stays responsive on a 45-day journal: one grouped query per paint over
``rule_fires`` restricted by the ``rule_fires_at`` index to the visible span
(at most 7 days), joined to the event row by primary key to name the harness;
the hold spans come from ``rule_holds`` (small); harness names come from the
skip-scan the Fleet pane uses. Nothing scans the journal. Time is journal time
(the newest row's ``at``), so a static store shows its own last week, not the
wall clock's.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from engine.timefmt import clock_ms, month_day_ms
from engine.views.fleet import harness_names
from engine.vocab import FIRED
from engine.vocab import LEVELS as LEVELS  # the console draws each level word

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

#: Zoom levels, narrowest first: the span of time the row of buckets covers.
ZOOMS: tuple[tuple[str, int], ...] = (
    ("1h", HOUR_MS),
    ("6h", 6 * HOUR_MS),
    ("24h", DAY_MS),
    ("7d", 7 * DAY_MS),
)
#: A fire's rank in a cell: 0 when it did not act, else 1 + its level's place in LEVELS.
_RANK_SQL = (
    f"CASE WHEN f.status != '{FIRED}' THEN 0 "
    + " ".join(f"WHEN f.effective_level = '{lvl}' THEN {i}" for i, lvl in enumerate(LEVELS, 1))
    + " ELSE 1 END"
)
#: Bucket widths are rounded up to one of these so the ruler reads in whole units.
_NICE_MS = (
    60_000,
    2 * 60_000,
    5 * 60_000,
    10 * 60_000,
    15 * 60_000,
    30 * 60_000,
    HOUR_MS,
    2 * HOUR_MS,
    3 * HOUR_MS,
    6 * HOUR_MS,
    12 * HOUR_MS,
    DAY_MS,
)


@dataclass(frozen=True, slots=True)
class Cell:
    """One (harness, bucket): the worst level that acted (None if only shadow/suppressed)."""

    level: str | None
    fires: int


@dataclass(frozen=True, slots=True)
class HoldSpan:
    """A hold on ``harness`` from ``start_at`` to ``end_at`` (None while still held)."""

    hold_id: int
    harness: str
    rule: str
    start_at: int
    end_at: int | None


@dataclass(frozen=True)
class Timeline:
    """What one paint shows: ``buckets`` columns of ``bucket_ms`` ending at ``end_ms``."""

    zoom: str
    start_ms: int
    end_ms: int
    bucket_ms: int
    buckets: int
    harnesses: tuple[str, ...]
    cells: dict[tuple[str, int], Cell]
    holds: tuple[HoldSpan, ...]
    #: Journal time of the newest row (the right edge when not panned).
    journal_end_ms: int

    @property
    def fires(self) -> int:
        return sum(c.fires for c in self.cells.values())

    def cell(self, harness: str, bucket: int) -> Cell | None:
        return self.cells.get((harness, bucket))

    def bucket_range(self, bucket: int) -> tuple[int, int]:
        """``[start, end)`` journal-time ms of column ``bucket``."""
        start = self.start_ms + bucket * self.bucket_ms
        return start, start + self.bucket_ms

    def held(self, harness: str, bucket: int) -> HoldSpan | None:
        """The hold covering any part of this cell, if one does."""
        lo, hi = self.bucket_range(bucket)
        for span in self.holds:
            if span.harness != harness:
                continue
            end = self.journal_end_ms if span.end_at is None else span.end_at
            if span.start_at < hi and end >= lo:
                return span
        return None


def zoom_span(zoom: str) -> int:
    for name, span in ZOOMS:
        if name == zoom:
            return span
    raise ValueError(f"unknown zoom {zoom!r} (use {', '.join(n for n, _ in ZOOMS)})")


def bucket_width(span_ms: int, columns: int) -> int:
    """The smallest nice bucket that fits ``span_ms`` in ``columns`` columns."""
    need = -(-span_ms // max(1, columns))
    for nice in _NICE_MS:
        if nice >= need:
            return nice
    return -(-need // DAY_MS) * DAY_MS


def journal_end(conn: sqlite3.Connection) -> int:
    """Journal time of the newest row (0 on an empty journal); read by primary key."""
    row = conn.execute("SELECT at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
    return int(row[0]) if row else 0


def build_timeline(
    conn: sqlite3.Connection,
    *,
    zoom: str = "24h",
    columns: int = 96,
    end_ms: int | None = None,
) -> Timeline:
    """The timeline of the ``zoom`` span ending at ``end_ms`` (default: the newest row).

    The right edge is rounded up to a whole bucket so the columns stay put while
    the journal grows within a bucket.
    """
    last = journal_end(conn)
    bucket = bucket_width(zoom_span(zoom), columns)
    edge = last if end_ms is None else end_ms
    end = (edge // bucket + 1) * bucket
    buckets = max(1, min(columns, -(-zoom_span(zoom) // bucket)))
    start = end - buckets * bucket
    cells: dict[tuple[str, int], Cell] = {}
    sql = (
        f"SELECT COALESCE(j.harness, f.target, '') AS h, (f.at - ?) / ? AS b, MAX({_RANK_SQL}),"
        " COUNT(*) FROM rule_fires f LEFT JOIN rule_journal j ON j.seq = f.seq"
        " WHERE f.at >= ? AND f.at < ? GROUP BY h, b"
    )
    for h, b, rank, n in conn.execute(sql, (start, bucket, start, end)):
        level = LEVELS[int(rank) - 1] if rank else None
        cells[(str(h), int(b))] = Cell(level, int(n))
    holds = tuple(
        HoldSpan(int(i), str(h), str(r), int(c), None if rel is None else int(rel))
        for i, h, r, c, rel in conn.execute(
            "SELECT id, harness, rule, created_at, released_at FROM rule_holds"
            " WHERE created_at < ? AND (released_at IS NULL OR released_at >= ?) ORDER BY id",
            (end, start),
        )
    )
    names = set(harness_names(conn))
    names.update(h for h, _ in cells)
    names.update(s.harness for s in holds)
    names.discard("")
    extra = sorted({h for h, _ in cells if h == ""})
    return Timeline(
        zoom=zoom,
        start_ms=start,
        end_ms=end,
        bucket_ms=bucket,
        buckets=buckets,
        harnesses=(*sorted(names), *extra),
        cells=cells,
        holds=holds,
        journal_end_ms=last,
    )


def format_bucket(ms: int) -> str:
    """A compact label for a bucket width: 5m, 2h, 1d."""
    if ms % DAY_MS == 0:
        return f"{ms // DAY_MS}d"
    if ms % HOUR_MS == 0:
        return f"{ms // HOUR_MS}h"
    return f"{ms // 60_000}m"


def format_tick(ms: int, bucket_ms: int) -> str:
    """A ruler label: the time of day for narrow buckets, the date for wide ones."""
    return month_day_ms(ms) if bucket_ms >= HOUR_MS else clock_ms(ms)
