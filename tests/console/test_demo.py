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


def test_a_running_demo_prunes_its_oldest_rows(tmp_path: Path) -> None:
    """P2.3: a demo left open levels off instead of growing without end."""
    from engine.fleet.sim import write_fleet
    from engine.store.db import connect
    from engine.views.live import trim_journal

    conn = connect(tmp_path / "j.db")
    write_fleet(conn, days=1, start_ms=1_772_323_200_000, validate=False)
    head = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    deleted = trim_journal(conn, keep_rows=5_000)
    left, first = conn.execute("SELECT COUNT(*), MIN(seq) FROM rule_journal").fetchone()
    assert deleted > 0 and 5_000 <= left < 5_100  # rows sharing the boundary's time stay
    assert conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0] == head
    assert first >= head - 5_100
    assert trim_journal(conn, keep_rows=10**9) == 0


@pytest.mark.slow
def test_closing_the_terminal_removes_the_demo_store(tmp_path: Path) -> None:
    """P2.3: SIGHUP (tmux kill-session, a closed window) ends the demo and removes its store."""
    import os
    import pty
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "HARNESS_CONFIG": str(tmp_path / "absent.toml"),
        "TERM": "xterm-256color",
        "COLUMNS": "100",
        "LINES": "30",
    }
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.harness", "console", "--demo"],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(child)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("harness-demo-*/journal.db")):
            assert time.monotonic() < deadline and proc.poll() is None, "the demo never started"
            time.sleep(0.1)
        time.sleep(2)  # the demo feed is writing
        proc.send_signal(signal.SIGHUP)
        os.close(main)  # and the terminal is gone
        proc.wait(timeout=30)
        assert not list(tmp_path.glob("harness-demo-*")), "the demo store was left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
