"""The seq range a backtest covers, resolved from ``--since | --from-seq`` and ``--until``.

Why its own module, and why it reads so little: resolving the range is the
first thing every backtest does, and on a 2.66M-row journal the plain SQL for
it (``min(seq), max(seq)`` in one statement, ``count(*), min(at), max(at)``
over the range, ``min(seq) WHERE at > ?``) walks the whole table, about 0.8 s
before a single rule runs. Two facts of the journal make every figure cheap:
``seq`` is the rowid, so the first and last seq are one seek each; and ``at``
is non-decreasing in ``seq`` (see :mod:`engine.journal.schema`), so the first
and last ``at`` of a range are the ``at`` of its first and last rows, and a
time bound is found by binary search over seq. Only the row count needs a
pass, and it takes the cheaper one: the whole table counted on its smallest
index when the range is the whole table, else the range or its complement,
whichever holds fewer rows.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from dataclasses import dataclass

from engine.durations import DurationError, parse_duration_ms
from engine.errors import InputError


@dataclass(frozen=True, slots=True)
class SeqRange:
    """The rows a backtest covers: ``first_seq``..``last_seq`` inclusive (0 rows if empty)."""

    first_seq: int
    last_seq: int
    rows: int
    first_at: int = 0
    last_at: int = 0


def _one(
    conn: sqlite3.Connection, sql: str, params: tuple[int, ...] = ()
) -> tuple[int, int] | None:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def _first_from(conn: sqlite3.Connection, seq: int) -> tuple[int, int] | None:
    """(seq, at) of the first row with seq >= ``seq`` (a rowid seek)."""
    return _one(
        conn, "SELECT seq, at FROM rule_journal WHERE seq >= ? ORDER BY seq LIMIT 1", (seq,)
    )


def _last_upto(conn: sqlite3.Connection, seq: int) -> tuple[int, int] | None:
    """(seq, at) of the last row with seq <= ``seq`` (a rowid seek)."""
    return _one(
        conn, "SELECT seq, at FROM rule_journal WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
    )


def _bounds(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(first seq, last seq, last at) of the journal; zeros when it is empty.

    Two statements on purpose: SQLite answers ``min(seq)`` or ``max(seq)``
    alone with one seek, but both in one statement with a pass over the table.
    """
    first = _one(conn, "SELECT seq, at FROM rule_journal ORDER BY seq LIMIT 1")
    last = _one(conn, "SELECT seq, at FROM rule_journal ORDER BY seq DESC LIMIT 1")
    if first is None or last is None:
        return 0, 0, 0
    return first[0], last[0], last[1]


def first_seq_after(conn: sqlite3.Connection, at_ms: int, lo: int, hi: int) -> int:
    """The first seq in ``lo..hi`` whose row has ``at > at_ms`` (``hi + 1`` when none).

    Binary search over seq, exact because ``at`` never decreases with seq:
    once the first row at or after a position is past ``at_ms``, so is every
    row after it.
    """
    a, b = lo, hi + 1
    while a < b:
        mid = (a + b) // 2
        found = _first_from(conn, mid)
        if found is None or found[0] > hi or found[1] > at_ms:
            b = mid
        else:  # every row up to ``found`` is at or before at_ms
            a = found[0] + 1
    found = _first_from(conn, a)
    return hi + 1 if found is None or found[0] > hi else found[0]


def count_rows(conn: sqlite3.Connection, first: int, last: int, lo: int, hi: int) -> int:
    """Rows with seq in ``first..last`` (the journal spans ``lo..hi``), by the cheapest pass.

    Counting a seq range reads the table's leaf pages, about ten times the
    work per row of counting the whole table on its smallest index; so a
    range that is most of the table is counted as the whole minus the rest.
    """
    if last < first:
        return 0
    if first <= lo and last >= hi:
        return int(conn.execute("SELECT count(*) FROM rule_journal").fetchone()[0])
    inside = last - first + 1
    outside = max(first - lo, 0) + max(hi - last, 0)
    between = "SELECT count(*) FROM rule_journal WHERE seq BETWEEN ? AND ?"
    if outside * 10 + (hi - lo + 1) >= inside * 10:
        return int(conn.execute(between, (first, last)).fetchone()[0])
    total = int(conn.execute("SELECT count(*) FROM rule_journal").fetchone()[0])
    before = int(conn.execute(between, (lo, first - 1)).fetchone()[0]) if first > lo else 0
    after = int(conn.execute(between, (last + 1, hi)).fetchone()[0]) if last < hi else 0
    return total - before - after


def _parse_time(text: str) -> int | None:
    try:
        value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return int(value.timestamp() * 1000)


def _until_seq(conn: sqlite3.Connection, until: str, lo: int, hi: int, last_at: int) -> int:
    """The last seq ``--until`` admits: a seq, a duration back from the last row, or a time."""
    text = until.strip()
    if text.isdigit():
        return min(hi, int(text))
    at_limit: int | None
    try:
        at_limit = last_at - parse_duration_ms(text)
    except DurationError:
        at_limit = _parse_time(text)
    if at_limit is None:
        raise InputError(
            f"--until {until!r}: expected a seq, a duration back from the last row"
            " (e.g. 24h) or an ISO time (2026-01-31T12:00:00Z)"
        )
    after = first_seq_after(conn, at_limit, lo, hi)  # the first row past the limit
    found = _last_upto(conn, after - 1)
    return found[0] if found is not None else 0


def resolve_range(
    conn: sqlite3.Connection,
    *,
    since: str | None = None,
    from_seq: int | None = None,
    until: str | None = None,
) -> SeqRange:
    """Turn ``--since DUR | --from-seq N`` and ``--until SEQ|DUR|TIME`` into a seq range.

    ``since`` and a duration ``until`` count back in journal time from the
    last row (never the wall clock); ``until`` may also be a seq or an ISO time.
    """
    if since is not None and from_seq is not None:
        raise InputError("--since and --from-seq are exclusive; give one")
    lo, hi, last_at = _bounds(conn)
    if hi == 0:
        return SeqRange(0, 0, 0)
    first = lo
    if from_seq is not None:
        if from_seq < 0:
            raise InputError(f"--from-seq must be >= 0, got {from_seq}")
        first = max(lo, from_seq)
    elif since is not None:
        try:
            span = parse_duration_ms(since)
        except DurationError as exc:
            raise InputError(f"--since: {exc}") from None
        first = first_seq_after(conn, last_at - span, lo, hi)
    last = hi if until is None else _until_seq(conn, until, lo, hi, last_at)
    if last < first:
        return SeqRange(first, last, 0)
    head, tail = _first_from(conn, first), _last_upto(conn, last)
    if head is None or tail is None or head[0] > last:
        return SeqRange(first, last, 0)
    rows = count_rows(conn, first, last, lo, hi)
    return SeqRange(first, last, rows, head[1], tail[1])
