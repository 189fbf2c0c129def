"""An idle console costs no CPU: every poller backs off on a static store, and still sees a change.

Issue 11 (item 10): the Fires tail, the embedded evaluator and the panes' timers
each woke many times a second on a store nothing wrote to. These tests pin the
pacing by counting looks and reading the backoff state, never by timing a run.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from console.messages import Backlog
from console.panes.fires import TAIL_IDLE_S, FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.timeline import TimelinePane
from console.widgets.footer import QuietFooter
from engine.config import HarnessConfig
from engine.journal.writer import Committer
from engine.store.db import connect
from engine.views.changes import Backoff
from engine.views.live import demo_config, run_evaluator
from tests.console.conftest import END_MS, AppFactory, until
from tests.console.test_panes import _add_fire
from tests.journal._util import tool_call


def test_backoff_doubles_while_quiet_up_to_its_cap_and_snaps_back_on_a_change() -> None:
    pace = Backoff(0.05, 0.5)
    waits = [pace.saw(False) for _ in range(7)]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    assert pace.saw(True) == 0.05
    assert pace.saw(False) == 0.05  # the first quiet look right after a change stays fast
    assert pace.saw(False) == 0.1


@pytest.mark.parametrize(("fast", "slow", "factor"), [(0, 1, 2), (1, 0.5, 2), (0.1, 1, 1)])
def test_backoff_refuses_a_pace_that_never_waits_or_never_grows(
    fast: float, slow: float, factor: float
) -> None:
    with pytest.raises(ValueError, match="fast"):
        Backoff(fast, slow, factor=factor)


class _CountedStop(threading.Event):
    """A stop event that records each wait instead of sleeping, and stops after ``limit``.

    ``during`` runs inside the given wait (by number), as a writer racing the evaluator would.
    """

    def __init__(self, limit: int, during: dict[int, object]) -> None:
        super().__init__()
        self.waits: list[float | None] = []
        self.limit = limit
        self.during = during

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        action = self.during.get(len(self.waits))
        if callable(action):
            action()
        if len(self.waits) >= self.limit:
            self.set()
        return self.is_set()


def test_embedded_evaluator_backs_off_on_a_static_store_and_resets_on_a_new_row(
    store: Path, policy_dir: Path
) -> None:
    """Empty steps wait longer and longer (up to EVAL_IDLE_S); a row brings the fast pace back."""

    def write_row() -> None:
        conn = connect(store)
        Committer(conn, ticks=False).admit([tool_call("h01")])
        conn.close()

    steps: list[int] = []
    stop = _CountedStop(limit=9, during={6: write_row})
    run_evaluator(
        store,
        demo_config(HarnessConfig()),
        policy_dir,
        stop,
        on_step=lambda result: steps.append(int(getattr(result, "rows", 0))),
        poll_s=0.05,
        idle_s=0.5,
    )
    # six empty steps, the new row (evaluated without waiting), then empty steps again
    assert stop.waits == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.05, 0.1, 0.2]
    assert 1 in steps and sum(steps) == 1


async def test_fires_tail_backs_off_on_a_static_store_and_still_shows_a_new_fire(
    make_app: AppFactory, store: Path
) -> None:
    app = make_app(initial="fires")  # poll_interval 0.05 s
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        await until(pilot, lambda: pane.pace.delay == TAIL_IDLE_S)
        looks = pane.looks
        await pilot.pause(2.0)
        # at most one look per TAIL_IDLE_S (a loaded machine makes fewer, never more);
        # polling at poll_interval would have made about 40
        assert pane.looks - looks <= 2.0 / TAIL_IDLE_S + 1
        new_id = _add_fire(store)  # another process commits a fire: seen at the next look
        await until(pilot, lambda: pane.window[-1].id == new_id)
        assert pane.pace.delay < TAIL_IDLE_S  # after a change it looks often again


async def test_the_evaluators_batch_wakes_a_backed_off_fires_tail(make_app: AppFactory) -> None:
    """The app pokes the tail when its evaluator stored a batch: its own fires show at once."""
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        sleeper = asyncio.create_task(pane._wait(3600.0))
        await pilot.pause(0.2)
        assert not sleeper.done()
        app.post_message(Backlog(10, 10))  # what the embedded evaluator posts after a batch
        await until(pilot, sleeper.done)


async def test_idle_panes_start_no_worker_while_the_store_files_stand_still(
    make_app: AppFactory, store: Path
) -> None:
    app = make_app(initial="fleet")  # refresh_interval 0.5 s, live, clock pinned
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FleetPane)
        await until(pilot, lambda: pane.rows)
        await until(pilot, lambda: pane.polls >= 1)  # the first tick reads (nothing seen yet)
        polls = pane.polls
        await pilot.pause(2.0)  # four ticks: a stat each, no worker
        assert pane.polls == polls
        _add_fire(store)
        await until(pilot, lambda: pane.polls > polls, timeout=10)


async def test_a_pane_switch_rebuilds_the_footer_once_and_moving_within_a_pane_not_at_all(
    make_app: AppFactory,
) -> None:
    """Textual's footer rebuilt itself once per bindings signal: four times per pane switch."""
    from textual.widgets._footer import FooterKey

    def shown() -> set[str]:
        return {k.description for k in app.screen.query(FooterKey)}

    app = make_app(initial="fleet")
    async with app.run_test(size=(160, 45)) as pilot:
        footer = app.query_one(QuietFooter)
        await until(pilot, lambda: "Refresh" in shown())
        await pilot.pause(0.3)
        before = footer.rebuilds
        await pilot.press("9")
        await until(pilot, lambda: "Fires" in shown() and "Refresh" not in shown())
        await pilot.pause(0.3)
        assert footer.rebuilds == before + 1
        await pilot.press("left", "up", "right")  # the cursor moves, the keys stay
        await pilot.pause(0.3)
        assert footer.rebuilds == before + 1
        await pilot.press("1")
        await until(pilot, lambda: "Refresh" in shown() and "Fires" not in shown())


async def test_a_hidden_pane_pauses_its_timer_and_catches_up_when_shown(
    make_app: AppFactory, store: Path
) -> None:
    app = make_app(initial="fleet")
    async with app.run_test(size=(120, 36)) as pilot:
        holds = app.query_one(HoldsPane)
        await until(pilot, lambda: holds.asleep)  # its first tick found it hidden
        shown = len(holds.rows)
        conn = connect(store)
        conn.execute(
            "INSERT INTO rule_holds (harness, rule, hash, event_seq, created_seq, created_at,"
            " reason) VALUES ('h09', 'probe_rule', 'h', 1, 1, 1772467500000, 'probe')"
        )
        conn.close()
        await pilot.pause(1.2)  # two periods: a paused timer reads nothing
        assert holds.asleep and len(holds.rows) == shown
        app.action_show_pane("holds")
        await until(pilot, lambda: not holds.asleep and len(holds.rows) == shown + 1)


@pytest.mark.parametrize("empty", [False, True])
async def test_the_timeline_loads_once_when_asked_and_reports_its_first_paint(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty: bool
) -> None:
    """Key 9 starts the load before the tab switch (not again at on_show); the paint is timed.

    The paint time is what the console benchmark reads; an empty grid is painted too.
    """
    import console.panes.timeline

    loads: list[str] = []
    real = console.panes.timeline.build_timeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        loads.append(str(kwargs.get("zoom")))
        return real(*args, **kwargs)

    monkeypatch.setattr(console.panes.timeline, "build_timeline", counted)
    empty_store = tmp_path / "empty.db"
    connect(empty_store).close()
    app = make_app(initial="fleet", store_path=empty_store if empty else None)
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(TimelinePane)
        await pilot.pause(0.3)
        assert loads == []  # a pane never shown loads nothing
        await pilot.press("9")
        await until(pilot, lambda: pane.painted_at > 0)
        assert pane.paint_ms > 0 and pane.timeline is not None
        assert (pane.timeline.harnesses == ()) is empty
        await pilot.pause(0.3)
        assert loads == ["24h"]


async def test_fleet_repaints_only_when_a_cell_reads_differently(make_app: AppFactory) -> None:
    """A refresh (or the minute's tick) that changes no cell does not rebuild the table."""
    app = make_app(initial="fleet")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FleetPane)
        await until(pilot, lambda: pane.renders == 1)
        ages = [r.last_age_ms for r in pane.rows]
        shown = pane.rows
        await pilot.press("r")  # a read, same store, same minute: same cells
        await until(pilot, lambda: pane.rows is not shown)
        assert pane.renders == 1
        app.context.clock = lambda: END_MS + 60_000  # a minute on: the recent ages move
        await until(pilot, lambda: [r.last_age_ms for r in pane.rows] != ages)
        await until(pilot, lambda: pane.renders == 2)


def test_fleet_activity_counted_in_sql_equals_a_count_of_every_row(store: Path) -> None:
    """The Fleet's per-hour activity, aggregated in SQL, equals bucketing each row in Python."""
    from engine.views.fleet import ALL_TYPES, fleet_summary

    conn = connect(store)
    start = END_MS - 24 * 3_600_000
    expected: dict[str, list[int]] = {}
    for harness, at in conn.execute(
        "SELECT harness, at FROM rule_journal WHERE harness IS NOT NULL AND at > ? AND at <= ?"
        f" AND type IN ({','.join('?' * len(ALL_TYPES))})",
        (start, END_MS, *ALL_TYPES),
    ):
        counts = expected.setdefault(harness, [0] * 24)
        counts[min(max((at - start - 1) // 3_600_000, 0), 23)] += 1
    got = {r.harness: list(r.activity) for r in fleet_summary(conn, END_MS)}
    conn.close()
    assert {h: c for h, c in got.items() if any(c)} == expected
