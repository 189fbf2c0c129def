"""SVG snapshots of the Timeline pane and the Promotion view at 160x45 and 80x24.

Kept apart from ``test_snapshots.py`` (one file per owner of the views); the
SVGs live under ``snapshots/test_snapshots_views/``. Refresh after an intended
change with ``pytest tests/console/test_snapshots_views.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from console.panes.promotion import PromotionScreen
from console.panes.rules import RulesPane
from console.panes.timeline import TimelinePane
from engine.config import HarnessConfig
from tests.console.conftest import AppFactory
from tests.console.test_snapshots import _until

SnapCompare = Callable[..., bool]
SIZES = [(160, 45), (80, 24)]


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_timeline_pane(snap_compare: SnapCompare, make_app: AppFactory, size: Any) -> None:
    app = make_app(initial="timeline", live=False)

    async def ready(pilot: Pilot[Any]) -> None:
        pane = app.query_one(TimelinePane)
        await _until(pilot, lambda: pane.timeline is not None)
        await pilot.press("plus")  # 6h: the demo hold on h05 and the fires before it
        await _until(pilot, lambda: pane.timeline is not None and pane.timeline.zoom == "6h")

    assert snap_compare(app, run_before=ready, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_promotion_view(snap_compare: SnapCompare, make_app: AppFactory, size: Any) -> None:
    app = make_app(initial="rules", live=False, config=HarnessConfig())

    async def ready(pilot: Pilot[Any]) -> None:
        rules = app.query_one(RulesPane)
        await _until(pilot, lambda: rules.rows)
        index = [r.name for r in rules.rows].index("restart_same_error")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("e")
        await _until(pilot, lambda: isinstance(app.screen, PromotionScreen))
        screen = app.screen
        assert isinstance(screen, PromotionScreen)
        await _until(pilot, lambda: screen.report is not None, timeout=30)

    assert snap_compare(app, run_before=ready, terminal_size=size)
