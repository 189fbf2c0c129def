"""``resolve_range`` gives what the plain SQL over the whole table gives, from seeks.

The plain statements (``min(seq), max(seq)`` together, ``count(*), min(at),
max(at)`` over the range, ``min(seq) WHERE at > ?``) walk the table; the
resolver answers from rowid seeks, a binary search on ``at`` (which never
decreases with seq) and the cheaper of two counts. Checked against those
statements on journals with holes in seq (pruned or deleted rows), runs of
equal ``at``, and every kind of bound.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules.evaluation.ranges import SeqRange, count_rows, first_seq_after, resolve_range
from engine.store.db import connect

T0 = 1_780_000_000_000


def plain(
    conn: sqlite3.Connection,
    since_ms: int | None,
    from_seq: int | None,
    until_seq: int | None,
    until_back_ms: int | None,
) -> SeqRange:
    """The resolver's answer the way it used to be computed."""
    lo, hi = conn.execute("SELECT min(seq), max(seq) FROM rule_journal").fetchone()
    if hi is None:
        return SeqRange(0, 0, 0)
    last_at = conn.execute("SELECT at FROM rule_journal WHERE seq = ?", (hi,)).fetchone()[0]
    first = lo
    if from_seq is not None:
        first = max(lo, from_seq)
    elif since_ms is not None:
        row = conn.execute(
            "SELECT min(seq) FROM rule_journal WHERE at > ?", (last_at - since_ms,)
        ).fetchone()
        first = row[0] if row[0] is not None else hi + 1
    last = hi
    if until_seq is not None:
        last = min(hi, until_seq)
    elif until_back_ms is not None:
        row = conn.execute(
            "SELECT max(seq) FROM rule_journal WHERE at <= ?", (last_at - until_back_ms,)
        ).fetchone()
        last = row[0] if row[0] is not None else 0
    if last < first:
        return SeqRange(first, last, 0)
    n, a, b = conn.execute(
        "SELECT count(*), min(at), max(at) FROM rule_journal WHERE seq BETWEEN ? AND ?",
        (first, last),
    ).fetchone()
    return SeqRange(first, last, n, a or 0, b or 0)


def journal(path: Path, steps: list[int], holes: set[int]) -> sqlite3.Connection:
    conn = connect(path)
    at = T0
    for i, step in enumerate(steps):
        at += step
        conn.execute(
            "INSERT INTO rule_journal (seq, at, kind, type, source) VALUES (?, ?, ?, ?, ?)",
            (i + 1, at, "tick", "tick", "tick"),
        )
    conn.executemany("DELETE FROM rule_journal WHERE seq = ?", [(h,) for h in holes])
    conn.commit()
    return conn


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.sampled_from([0, 0, 1, 1000, 60_000]), min_size=0, max_size=60),
    holes=st.sets(st.integers(1, 60), max_size=30),
    bound=st.one_of(
        st.tuples(st.none(), st.none()),
        st.tuples(st.just("since"), st.integers(0, 200_000)),
        st.tuples(st.just("from"), st.integers(0, 70)),
    ),
    until=st.one_of(
        st.tuples(st.none(), st.none()),
        st.tuples(st.just("seq"), st.integers(0, 70)),
        st.tuples(st.just("back"), st.integers(0, 200_000)),
    ),
)
def test_resolver_equals_the_plain_statements(
    tmp_path_factory: object,
    steps: list[int],
    holes: set[int],
    bound: tuple[str | None, int | None],
    until: tuple[str | None, int | None],
) -> None:
    path = tmp_path_factory.mktemp("r") / "s.db"  # type: ignore[attr-defined]
    conn = journal(path, steps, holes)
    since_ms = bound[1] if bound[0] == "since" else None
    from_seq = bound[1] if bound[0] == "from" else None
    until_seq = until[1] if until[0] == "seq" else None
    until_back = until[1] if until[0] == "back" else None
    got = resolve_range(
        conn,
        since=None if since_ms is None else f"{since_ms}ms",
        from_seq=from_seq,
        until=(str(until_seq) if until_seq is not None else None)
        if until_back is None
        else f"{until_back}ms",
    )
    assert got == plain(conn, since_ms, from_seq, until_seq, until_back)


def test_counts_take_either_pass_and_agree(tmp_path: Path) -> None:
    conn = journal(tmp_path / "s.db", [1000] * 500, set(range(5, 400, 7)))
    lo, hi = 1, 500
    for first, last in [(1, 500), (2, 499), (100, 120), (1, 10), (480, 500), (3, 2), (0, 600)]:
        want = conn.execute(
            "SELECT count(*) FROM rule_journal WHERE seq BETWEEN ? AND ?", (first, last)
        ).fetchone()[0]
        assert count_rows(conn, first, last, lo, hi) == want
    assert first_seq_after(conn, T0 + 250_000, lo, hi) == 251  # strictly after
    assert first_seq_after(conn, T0 + 10**9, lo, hi) == hi + 1
