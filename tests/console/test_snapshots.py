"""SVG snapshots of every pane on fixed data (pinned clock, no blinking cursors).

Each pane at 120x36, and Fires, Rules, Holds and Decide at 80x24 too (issue 19
P2.10). The SVGs live under ``snapshots/test_snapshots/``; after an intended visual
change, review and refresh them with ``pytest tests/console/test_snapshots.py
--snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from console.panes.backtest import BacktestPane
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.rules import RulesPane
from tests.console.conftest import AppFactory, until

SnapCompare = Callable[..., bool]


async def _until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 30) -> None:
    """Wait for the state, then one more refresh so the picture shows it."""
    await until(pilot, predicate, timeout)
    await pilot.pause(0.1)


def test_fleet_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="fleet", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: len(app.query_one(FleetPane).rows) == 12)

    assert snap_compare(app, run_before=ready)


def test_fires_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="fires", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(FiresPane).window)

    assert snap_compare(app, run_before=ready)


def test_fires_pane_paused_with_filter(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="fires", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(FiresPane)
        await _until(pilot, lambda: pane.window)
        pane.set_filter_text("status:suppressed")
        await _until(pilot, lambda: pane.window and pane.window[0].status == "suppressed")
        await pilot.press("up", "up")

    assert snap_compare(app, run_before=ready)


def test_rules_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="rules", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(RulesPane)
        await _until(pilot, lambda: pane.rows)
        # no wait for a later column sizing: the table sizes its columns with the rows

    assert snap_compare(app, run_before=ready)


def test_holds_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="holds", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(HoldsPane).rows)

    assert snap_compare(app, run_before=ready)


def test_decide_pane(snap_compare: SnapCompare, make_app: AppFactory, spec_file: Path) -> None:
    app = make_app(initial="decide", live=False, specs=(str(spec_file),))

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DecidePane)
        await _until(pilot, lambda: pane.spec is not None)
        app.query_one("#decide-input", Input).value = "please fill the form"
        await _until(pilot, lambda: pane.result is not None and pane.result.decision.route)

    assert snap_compare(app, run_before=ready)


def test_explain_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="fires", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        fires = app.query_one(FiresPane)
        await _until(pilot, lambda: fires.window)
        fire = next(f for f in fires.window if f.rule == "restart_same_error")
        app.query_one(ExplainPane).load_fire(fire.id)
        app.action_show_pane("explain")
        await _until(pilot, lambda: app.query_one(ExplainPane).explanation is not None)
        await pilot.press("right")  # (step 3 names the rule file: a machine-specific path)

    assert snap_compare(app, run_before=ready)


def test_backtest_pane(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="backtest", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(BacktestPane)
        await _until(pilot, lambda: pane.rules)
        pane.select_rule("verify_same_failure")
        await _until(pilot, lambda: pane.candidate is not None)
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: pane.last_run is not None, timeout=20)
        table = app.query_one("#backtest-fires", DataTable)
        await _until(pilot, lambda: table.row_count)

    assert snap_compare(app, run_before=ready)


def test_proposals_pane(snap_compare: SnapCompare, make_app: AppFactory, store: Path) -> None:
    from console.panes.proposals import ProposalsPane
    from tests.console.test_proposals_pane import add_proposal

    add_proposal(store)
    app = make_app(initial="proposals", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(ProposalsPane).rows)

    assert snap_compare(app, run_before=ready)


# -- 80x24 (issue 19 P2.10): every pane usable on a small terminal ----------------------

SMALL = (80, 24)


def test_fires_pane_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="fires", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(FiresPane).window)

    assert snap_compare(app, run_before=ready, terminal_size=SMALL)


def test_rules_pane_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="rules", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(RulesPane).rows)

    assert snap_compare(app, run_before=ready, terminal_size=SMALL)


def test_holds_pane_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app = make_app(initial="holds", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        await _until(pilot, lambda: app.query_one(HoldsPane).rows)

    assert snap_compare(app, run_before=ready, terminal_size=SMALL)


def test_decide_pane_80x24(
    snap_compare: SnapCompare, make_app: AppFactory, spec_file: Path
) -> None:
    app = make_app(initial="decide", live=False, specs=(str(spec_file),))

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DecidePane)
        await _until(pilot, lambda: pane.spec is not None)
        app.query_one("#decide-input", Input).value = "please fill the form"
        await _until(pilot, lambda: pane.result is not None and pane.result.decision.route)

    assert snap_compare(app, run_before=ready, terminal_size=SMALL)
