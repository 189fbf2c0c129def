"""``--demo``: within 10 seconds the operator sees fires arrive, a rule in shadow and a hold."""

from __future__ import annotations

import time
from itertools import islice
from pathlib import Path

import pytest

from console.app import HarnessConsole
from console.context import ConsoleContext
from console.panes.fires import FiresPane
from console.panes.holds import HoldsPane
from console.panes.rules import RulesPane
from engine.views.live import DEMO_DAY, replay_rows
from engine.views.session import ConsoleOptions


def test_replay_is_monotonic_and_endless() -> None:
    rows = list(islice(replay_rows(1_000_000, speed=400.0), 200_000))
    ats = [r[0] for r in rows]
    assert ats == sorted(ats) and ats[0] >= 1_000_000
    assert len(rows) == 200_000  # more than one simulated day: it does not run dry
    assert DEMO_DAY % 3 == 1  # the restart burst day (the hold)


#: The demo promises all three within 10 s on a quiet machine; the test allows three times that,
#: because CI runs it beside the rest of the suite on two loaded cores and a wall-clock bound
#: there measures the machine. What it must catch is a demo that never shows one of them.
DEADLINE_S = 30


@pytest.mark.slow
async def test_demo_shows_fires_shadow_and_hold(tmp_path: Path) -> None:
    options = ConsoleOptions.from_args(store=str(tmp_path / "demo" / "journal.db"), demo=True)
    app = HarnessConsole(ConsoleContext(options), watch_files=False)
    started = time.monotonic()
    async with app.run_test(size=(120, 36)) as pilot:
        fires = app.query_one(FiresPane)
        rules = app.query_one(RulesPane)
        holds = app.query_one(HoldsPane)
        first_live: int | None = None
        seen: dict[str, float] = {}
        looks = 0
        while time.monotonic() - started < DEADLINE_S and len(seen) < 3:
            # the operator looks at each pane in turn (a hidden pane does not poll the
            # store), as a person does: switching tabs ten times a second re-lays out the
            # screen so often that it starves the demo's writer thread
            app.action_show_pane(("fires", "rules", "holds")[looks % 3])
            looks += 1
            await pilot.pause(0.4)
            if fires.window and first_live is None:
                first_live = fires.window[-1].id
            if first_live is not None and fires.window and fires.window[-1].id > first_live:
                seen.setdefault("fires arrive", time.monotonic() - started)
            if any(r.state == "shadow" for r in rules.rows):
                seen.setdefault("shadow", time.monotonic() - started)
            if any(h.active for h in holds.rows):
                seen.setdefault("hold", time.monotonic() - started)
        assert set(seen) == {"fires arrive", "shadow", "hold"}, seen
