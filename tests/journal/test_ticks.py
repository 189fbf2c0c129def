"""Tick rows: one per minute boundary of journal time while the journal is served."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.journal.queue import JournalWriter
from engine.journal.writer import MAX_GAP_TICKS, MINUTE_MS, Committer
from engine.store.migrations import migrate
from tests.journal._util import T0, FakeClock, all_rows, store, tool_call


def ticks(conn) -> list[int]:  # type: ignore[no-untyped-def]
    return [r[1] for r in all_rows(conn) if r[2] == "tick"]


def test_the_first_admission_starts_journal_time_without_ticks(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    result = Committer(conn, clock=FakeClock(T0 + 30_000)).admit([tool_call()])
    assert result.ticks == 0
    assert ticks(conn) == []


def test_each_crossed_minute_gets_a_tick_before_the_rows(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    clock = FakeClock(T0 + 30_000)
    c = Committer(conn, clock=clock)
    c.admit([tool_call()])
    clock.now = T0 + 3 * MINUTE_MS + 5  # crosses 1, 2 and 3 minutes
    result = c.admit([tool_call("h2")])
    assert result.ticks == 3
    rows = all_rows(conn)
    assert [(r[1], r[3]) for r in rows] == [
        (T0 + 30_000, "tool_call"),
        (T0 + MINUTE_MS, "tick"),
        (T0 + 2 * MINUTE_MS, "tick"),
        (T0 + 3 * MINUTE_MS, "tick"),
        (T0 + 3 * MINUTE_MS + 5, "tool_call"),
    ]
    # Same minute again: no new tick, and a boundary hit exactly ticks once.
    clock.now = T0 + 3 * MINUTE_MS + 50
    assert c.admit([tool_call()]).ticks == 0
    clock.now = T0 + 4 * MINUTE_MS
    assert c.admit([]).ticks == 1
    assert c.admit([]).ticks == 0
    assert ticks(conn)[-1] == T0 + 4 * MINUTE_MS


def test_a_long_gap_gets_only_the_last_day_of_ticks(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    clock = FakeClock(T0)
    c = Committer(conn, clock=clock)
    c.admit([tool_call()])
    clock.now = T0 + 3 * 1440 * MINUTE_MS + 10
    assert c.admit([]).ticks == MAX_GAP_TICKS
    got = ticks(conn)
    assert got[-1] == T0 + 3 * 1440 * MINUTE_MS
    assert got[0] == got[-1] - (MAX_GAP_TICKS - 1) * MINUTE_MS
    assert all(b - a == MINUTE_MS for a, b in itertools.pairwise(got))


def test_the_served_writer_ticks_without_any_rows(tmp_path: Path) -> None:
    path, conn = store(tmp_path)
    clock = FakeClock(T0 + 1)
    Committer(conn, clock=clock).admit([tool_call()])
    with JournalWriter(path, clock=clock, tick_poll_s=0.01) as writer:
        clock.now = T0 + 2 * MINUTE_MS + 1
        deadline = time.monotonic() + 5
        while len(ticks(conn)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert ticks(conn) == [T0 + MINUTE_MS, T0 + 2 * MINUTE_MS]
    assert writer.stats().ticks == 2


def _hist(at: int, typ: str = "tool_call") -> tuple[object, ...]:
    if typ == "tick":
        return (at, "tick", "tick", "tick", *[None] * 11)
    return (at, "run_event", "tool_call", "observer", "h1", None, None, "bash", *[None] * 7)


def test_import_can_synthesise_ticks_and_skips_the_file_ticks(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    rows = [_hist(T0 + 10), _hist(T0 + MINUTE_MS, "tick"), _hist(T0 + 2 * MINUTE_MS + 7)]
    result = Committer(conn).import_history(rows, synth_ticks=True)
    assert (result.admitted, result.ticks, result.skipped_ticks) == (2, 2, 1)
    assert [(r[1], r[3]) for r in all_rows(conn)] == [
        (T0 + 10, "tool_call"),
        (T0 + MINUTE_MS, "tick"),
        (T0 + 2 * MINUTE_MS, "tick"),
        (T0 + 2 * MINUTE_MS + 7, "tool_call"),
    ]
    # Live admission continues from the imported tick, not from scratch.
    c = Committer(conn, clock=FakeClock(T0 + 3 * MINUTE_MS))
    assert c.admit([tool_call()]).ticks == 1


def test_import_without_synthesis_keeps_file_ticks(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    rows = [_hist(T0 + 10), _hist(T0 + MINUTE_MS, "tick"), _hist(T0 + 2 * MINUTE_MS + 7)]
    result = Committer(conn).import_history(rows)
    assert (result.admitted, result.ticks) == (3, 0)
    assert ticks(conn) == [T0 + MINUTE_MS]


def test_ticks_never_go_back_after_an_import_without_ticks(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    clock = FakeClock(T0 + 10)
    c = Committer(conn, clock=clock)
    c.admit([tool_call()])
    clock.now = T0 + MINUTE_MS + 10
    c.admit([tool_call()])  # ticks minute 1
    Committer(conn).import_history([_hist(T0 + 5 * MINUTE_MS + 30)])  # no ticks in between
    clock.now = T0 + 7 * MINUTE_MS
    assert c.admit([tool_call()]).ticks == 2  # minutes 6 and 7, not 2..7
    ats = [r[1] for r in all_rows(conn)]
    assert ats == sorted(ats)
    assert ticks(conn) == [T0 + MINUTE_MS, T0 + 6 * MINUTE_MS, T0 + 7 * MINUTE_MS]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-5 * MINUTE_MS, 30 * MINUTE_MS), st.integers(0, 3)),
        min_size=1,
        max_size=25,
    )
)
def test_every_minute_boundary_ticks_exactly_once(steps: list[tuple[int, int]]) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    clock = FakeClock(T0 + 12_345)
    c = Committer(conn, clock=clock)
    c.admit([tool_call()])
    for delta, n in steps:
        clock.now += delta
        c.admit([tool_call()] * n)
    rows = all_rows(conn)
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    ats = [r[1] for r in rows]
    assert ats == sorted(ats)
    first, last = ats[0], ats[-1]
    expected = list(range((first // MINUTE_MS + 1) * MINUTE_MS, last + 1, MINUTE_MS))
    assert ticks(conn) == expected
