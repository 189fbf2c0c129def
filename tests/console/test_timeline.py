"""Timeline: the read model against a brute-force count, and the pane's zoom and Enter."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static, TabbedContent

from console.panes.fires import FiresPane
from console.panes.timeline import TimelineGrid, TimelinePane
from engine.store.db import connect
from engine.views.fires import FireFilter, fires_before
from engine.views.timeline import (
    DAY_MS,
    HOUR_MS,
    LEVELS,
    bucket_width,
    build_timeline,
    format_bucket,
    zoom_span,
)
from tests.console.conftest import END_MS, AppFactory, until


def _conn(store: Path) -> sqlite3.Connection:
    return connect(store, check_same_thread=False)


def _expected(conn: sqlite3.Connection, start: int, end: int, bucket: int) -> dict[Any, Any]:
    """Cells computed the slow way: every fire in range, its harness, the worst acting level."""
    out: dict[tuple[str, int], tuple[str | None, int]] = {}
    for seq, at, target, level, status in conn.execute(
        "SELECT seq, at, target, effective_level, status FROM rule_fires"
    ):
        if not start <= at < end:
            continue
        row = conn.execute("SELECT harness FROM rule_journal WHERE seq = ?", (seq,)).fetchone()
        harness = (row[0] if row and row[0] else None) or target or ""
        key = (harness, (at - start) // bucket)
        worst, n = out.get(key, (None, 0))
        if status == "fired" and (worst is None or LEVELS.index(level) > LEVELS.index(worst)):
            worst = level
        out[key] = (worst, n + 1)
    return out


@pytest.mark.parametrize("zoom", ["1h", "6h", "24h", "7d"])
def test_cells_equal_a_brute_force_count(store: Path, zoom: str) -> None:
    conn = _conn(store)
    tl = build_timeline(conn, zoom=zoom, columns=140)
    assert tl.buckets <= 140 and tl.buckets * tl.bucket_ms >= zoom_span(zoom)
    assert tl.start_ms <= END_MS - zoom_span(zoom) + tl.bucket_ms and tl.end_ms > END_MS - 60_000
    got = {k: (c.level, c.fires) for k, c in tl.cells.items()}
    assert got == _expected(conn, tl.start_ms, tl.end_ms, tl.bucket_ms)
    assert "h05" in tl.harnesses and len(tl.harnesses) >= 12


def test_the_demo_hold_is_a_span_to_the_right_edge(store: Path) -> None:
    conn = _conn(store)
    tl = build_timeline(conn, zoom="6h", columns=72)
    (span,) = [s for s in tl.holds if s.harness == "h05"]
    assert span.end_at is None  # still held when the history stops
    first = (span.start_at - tl.start_ms) // tl.bucket_ms
    assert tl.held("h05", tl.buckets - 1) is span
    assert tl.held("h05", first) is span and tl.held("h05", first - 1) is None
    assert tl.held("h01", tl.buckets - 1) is None
    cell = tl.cell("h05", first)
    assert cell is not None and cell.level == "hold"


def test_panning_moves_the_window_and_buckets_are_nice(store: Path) -> None:
    conn = _conn(store)
    now = build_timeline(conn, zoom="24h", columns=96)
    back = build_timeline(conn, zoom="24h", columns=96, end_ms=END_MS - DAY_MS)
    assert back.end_ms == now.end_ms - DAY_MS and back.bucket_ms == now.bucket_ms == 15 * 60_000
    assert bucket_width(HOUR_MS, 60) == 60_000 and bucket_width(7 * DAY_MS, 60) == 3 * HOUR_MS
    assert format_bucket(15 * 60_000) == "15m" and format_bucket(2 * HOUR_MS) == "2h"
    with pytest.raises(ValueError, match="unknown zoom"):
        zoom_span("2w")


def test_fire_filter_time_range(store: Path) -> None:
    conn = _conn(store)
    tl = build_timeline(conn, zoom="24h", columns=96)
    (key, cell) = next((k, c) for k, c in tl.cells.items() if c.fires >= 1)
    lo, hi = tl.bucket_range(key[1])
    flt = FireFilter(harness=key[0], at_from=lo, at_to=hi)
    rows = fires_before(conn, flt, None, 500)
    assert len(rows) == cell.fires and all(lo <= r.at < hi for r in rows)
    assert "harness:" in flt.describe() and "at:" in flt.describe()
    assert not flt.empty and FireFilter(at_from=lo).timed


async def test_timeline_zooms_and_enter_opens_fires_for_the_cell(make_app: AppFactory) -> None:
    app = make_app(initial="fleet", live=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("9")
        assert app.query_one("#panes", TabbedContent).active == "timeline"
        pane = app.query_one(TimelinePane)
        await until(pilot, lambda: pane.timeline is not None)
        assert pane.timeline is not None and pane.timeline.zoom == "24h"
        await pilot.press("minus")
        await until(pilot, lambda: pane.timeline is not None and pane.timeline.zoom == "7d")
        await pilot.press("plus", "plus")
        await until(pilot, lambda: pane.timeline is not None and pane.timeline.zoom == "6h")
        tl = pane.timeline
        assert tl is not None and "zoom 6h" in str(app.query_one("#timeline-status").render())
        (harness, bucket), cell = next(
            (k, c) for k, c in sorted(tl.cells.items()) if k[0] == "h05" and c.level == "hold"
        )
        grid = app.query_one(TimelineGrid)
        assert app.focused is grid and grid.cursor == (0, tl.buckets)
        await pilot.press("down", "left", "left")
        assert grid.cursor == (1, tl.buckets - 2)
        grid.cursor = (tl.harnesses.index(harness), bucket + 2)
        await pilot.press("left")
        await until(
            pilot, lambda: "cursor h05" in str(app.query_one("#timeline-status", Static).render())
        )
        await pilot.press("enter")
        fires = app.query_one(FiresPane)
        await until(pilot, lambda: fires.loaded and fires.flt.timed)
        assert app.query_one("#panes", TabbedContent).active == "fires"
        lo, hi = tl.bucket_range(bucket)
        assert (fires.flt.harness, fires.flt.at_from, fires.flt.at_to) == ("h05", lo, hi)
        assert len(fires.window) == cell.fires
        assert all(lo <= r.at < hi for r in fires.window)
        assert "at:" in str(app.query_one("#fires-status", Static).render())


async def test_timeline_pans_back_and_returns_to_now(make_app: AppFactory) -> None:
    app = make_app(initial="timeline", live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(TimelinePane)
        await until(pilot, lambda: pane.timeline is not None)
        assert pane.timeline is not None
        right = pane.timeline.end_ms
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: pane.timeline is not None and pane.timeline.end_ms < right)
        assert "panned back" in str(app.query_one("#timeline-status").render())
        await pilot.press("n")
        await until(pilot, lambda: pane.timeline is not None and pane.timeline.end_ms == right)
