"""Pilot tests for what an operator tripped on (issue 11): keys, focus, Esc, filters, Explain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Input, Static, TabbedContent
from textual.widgets.data_table import ColumnKey

from console.app import PANES, HarnessConsole
from console.help import KeysScreen
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.rules import RulesPane
from tests.console.conftest import AppFactory, until


def text(app: HarnessConsole, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


def active(app: HarnessConsole) -> str:
    return str(app.query_one("#panes", TabbedContent).active)


async def test_decide_esc_frees_the_number_keys(make_app: AppFactory, spec_file: Path) -> None:
    """Item 3 and issue 19 P2.7: Decide opens on its result; `i` types, Esc frees the numbers."""
    app = make_app(initial="decide", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        box = app.query_one("#decide-input", Input)
        assert app.focused is not box  # a number key switches panes from the first moment
        await pilot.press("i", "f", "3")
        assert box.value == "f3" and active(app) == "decide"  # typing still types
        await pilot.press("escape")
        assert app.focused is not box and active(app) == "decide"
        await pilot.press("3")
        assert active(app) == "rules" and box.value == "f3"
        await pilot.press("5")
        assert active(app) == "decide" and app.focused is not box
        await pilot.press("i")
        await until(pilot, lambda: app.focused is box)


async def test_question_mark_lists_every_key_of_every_pane(make_app: AppFactory) -> None:
    """Item 11: `?` shows all keys (numbers included); the footer shows the pane numbers."""
    from textual.widgets._footer import FooterKey

    app = make_app(initial="fleet")
    async with app.run_test(size=(160, 45)) as pilot:
        # The footer composes its keys after the first refresh; on a loaded machine that can
        # take longer than any fixed pause, so wait for them instead of sleeping.
        await until(pilot, lambda: {"1", "8"} <= {k.key for k in app.screen.query(FooterKey)})
        await pilot.press("question_mark")
        assert isinstance(app.screen, KeysScreen)
        titles = [section.title for section in app.screen.sections]
        assert titles == ["Everywhere", *(spec.title for spec in PANES)]
        flat = {(s.title, key) for s in app.screen.sections for key, _ in s.keys}
        assert ("Everywhere", "1-8") in flat or ("Everywhere", f"1-{len(PANES)}") in flat
        assert ("Holds", "x") in flat and ("Holds", "⏎") in flat
        assert ("Fires", "/") in flat and ("Decide", "^s") in flat
        await pilot.press("escape")
        assert not isinstance(app.screen, KeysScreen)


async def test_esc_returns_from_explain_to_where_you_came_from(make_app: AppFactory) -> None:
    """Item 11: Fires → enter → Explain → Esc is back on Fires."""
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        fires = app.query_one(FiresPane)
        await until(pilot, lambda: fires.window)
        await pilot.press("enter")
        await until(pilot, lambda: active(app) == "explain")
        await pilot.press("escape")
        await until(pilot, lambda: active(app) == "fires")


async def test_rules_source_panel_closes_with_esc(make_app: AppFactory) -> None:
    """Item 13: the side panel closes with Esc and fits a rule's name on one line."""
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        await pilot.press("enter")
        panel = app.query_one("#rules-source")
        await until(pilot, lambda: panel.display and panel.size.width > 0)
        assert not panel.has_class("hidden")
        assert panel.size.width >= 60
        await pilot.press("escape")
        await until(pilot, lambda: panel.has_class("hidden"))
        assert active(app) == "rules"


async def test_fires_filter_substring_esc_clears_and_fleet_filter_shown(
    make_app: AppFactory,
) -> None:
    """Item 8: a bare word is a substring of rule/harness/target/status; Esc clears it."""
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        await pilot.press("slash", *"same_err", "enter")
        await until(pilot, lambda: pane.flt.words == ("same_err",) and pane.window)
        assert {f.rule for f in pane.window} == {"restart_same_error"}
        assert "esc clears" in text(app, "#fires-status")
        await pilot.press("escape")
        await until(pilot, lambda: pane.flt.empty and pane.window)
        assert len({f.rule for f in pane.window}) > 1
        app.action_show_pane("fleet")
        fleet = app.query_one(FleetPane)
        await until(pilot, lambda: fleet.rows)
        await pilot.pause(0.1)
        await pilot.press("enter")
        harness = fleet.rows[0].harness
        await until(pilot, lambda: active(app) == "fires" and pane.loaded)
        status = text(app, "#fires-status")
        assert f"harness:{harness}" in status and "esc clears" in status


async def test_explain_reads_like_a_story(make_app: AppFactory, store: Path) -> None:
    """Item 7: dates not epoch ms, rows behind aggregates, scrolled to the new step, the hold."""
    app = make_app(initial="holds")
    async with app.run_test(size=(120, 30)) as pilot:
        holds = app.query_one(HoldsPane)
        await until(pilot, lambda: holds.rows)
        hold = holds.rows[0]
        assert hold.fire_id is not None
        await pilot.press("enter")  # item 16: Holds → Enter explains the fire behind it
        explain = app.query_one(ExplainPane)
        await until(pilot, lambda: explain.explanation is not None)
        assert active(app) == "explain" and explain.explanation is not None
        assert explain.explanation.fire_id == hold.fire_id
        event = "\n".join(explain.explanation.steps[0].lines)
        assert "at: 20" in event and "Z (" in event
        calls = [s for s in explain.explanation.steps if s.kind == "call"]
        assert calls and any(" run " in line and "seq " in line for line in calls[0].lines)
        actions = explain.explanation.steps[-1]
        assert f"created hold #{hold.id} on {hold.harness}" in "\n".join(actions.lines)
        for _ in explain.explanation.steps:
            await pilot.press("right")
        scroll = app.query_one("#explain-steps")
        current = app.query_one("#explain-current")
        await until(pilot, lambda: scroll.max_scroll_y > 0 and scroll.scroll_y > 0)
        assert current.region.y >= scroll.region.y
        assert "created hold" in text(app, "#explain-current")
        await pilot.press("escape")
        await until(pilot, lambda: active(app) == "holds")


async def test_explain_in_demo_names_the_in_memory_enforce(store: Path, policy_dir: Path) -> None:
    """Item 7: in --demo the decision says the session enforces the rule in memory."""
    from console.context import ConsoleContext
    from engine.config import HarnessConfig
    from engine.views.live import DEMO_ENFORCE, demo_config
    from engine.views.session import ConsoleOptions

    options = ConsoleOptions(
        store_path=store, demo=True, policy_dir=policy_dir, config=demo_config(HarnessConfig())
    )
    context = ConsoleContext(options, live=False, evaluate=False, cursor_blink=False)
    app = HarnessConsole(context, initial="holds", watch_files=False)
    async with app.run_test(size=(120, 36)) as pilot:
        holds = app.query_one(HoldsPane)
        await until(pilot, lambda: holds.rows)
        await pilot.press("enter")
        explain = app.query_one(ExplainPane)
        await until(pilot, lambda: explain.explanation is not None)
        assert explain.explanation is not None and explain.explanation.rule == DEMO_ENFORCE
        decision = next(s for s in explain.explanation.steps if s.kind == "decision")
        joined = "\n".join(decision.lines)
        assert "enforced in memory by this --demo session" in joined
        assert "(absent)" not in joined


async def test_fleet_one_scale_blank_zeros(make_app: AppFactory) -> None:
    """Item 5: zeros are blank, every row shares one scale, and the status line says it."""
    from console.widgets.spark import sparkline
    from tests.console.conftest import END_MS

    app = make_app(initial="fleet", live=False, clock_ms=END_MS + 20 * 3_600_000)
    async with app.run_test(size=(160, 45)) as pilot:
        fleet = app.query_one(FleetPane)
        await until(pilot, lambda: fleet.rows)
        table = app.query_one("#fleet-table", DataTable)
        top = max(max(r.activity) for r in fleet.rows)
        assert top > 0
        assert str(table.columns[ColumnKey("activity")].label) == "activity 24h"
        assert f"activity █ = {top:,}/h" in text(app, "#fleet-status")  # said once, whole
        for i, row in enumerate(fleet.rows):
            cell = str(table.get_row_at(i)[-1])
            assert cell == sparkline(row.activity, top)
            assert [c == " " for c in cell] == [v == 0 for v in row.activity]
        assert sparkline([0, 0, 0]) == "   "


async def test_fleet_marks_stale_running_harnesses(make_app: AppFactory) -> None:
    """Item 6: `running` with a last event long ago is marked stale (threshold configurable)."""

    from engine.config import HarnessConfig
    from engine.config_text import parse_config
    from engine.views.live import demo_config
    from tests.console.conftest import END_MS

    parsed = parse_config('[console]\nstale_after = "3h"\n', "harness.toml")
    assert parsed.console_stale_after_ms == 3 * 3_600_000
    config = demo_config(HarnessConfig()).replace(console_stale_after_ms=3_600_000)
    app = make_app(initial="fleet", live=False, config=config, clock_ms=END_MS + 19 * 3_600_000)
    async with app.run_test(size=(160, 45)) as pilot:
        fleet = app.query_one(FleetPane)
        await until(pilot, lambda: fleet.rows)
        running = [r for r in fleet.rows if r.state == "running"]
        assert running and all(r.stale for r in running)
        table = app.query_one("#fleet-table", DataTable)
        row = fleet.rows.index(running[0])
        assert "stale" in str(table.get_row_at(row)[1])
        assert "stale" in text(app, "#fleet-status") and "[console] stale_after" in text(
            app, "#fleet-status"
        )
    fresh = make_app(initial="fleet", live=False, config=config)
    async with fresh.run_test(size=(160, 45)) as pilot:
        fleet = fresh.query_one(FleetPane)
        await until(pilot, lambda: fleet.rows)
        assert not any(r.stale for r in fleet.rows if r.last_age_ms < 3_600_000)


async def test_decide_refuses_a_spec_validate_rejects(
    make_app: AppFactory, spec_file: Path
) -> None:
    """Item 4: one loader for CLI and console: an invalid spec shows its located errors."""
    from engine.skillspec.load import check_spec

    bad = spec_file.parent / "bad.spec.yml"
    bad.write_text(
        spec_file.read_text(encoding="utf-8").replace("prefer: fill_pdf_form", "prefer: nowhere"),
        encoding="utf-8",
    )
    assert not check_spec(bad).ok  # what `skillspec validate` says
    app = make_app(initial="decide", specs=(str(bad),))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.error)
        assert pane.spec is None
        box = text(app, "#decide-error")
        line = bad.read_text(encoding="utf-8").splitlines().index("    prefer: nowhere") + 1
        assert "does not validate" in box and f"bad.spec.yml:{line}:" in box
        assert "nowhere" in box
        await pilot.press(*"fill the form")
        await pilot.pause(0.2)
        assert pane.result is None  # no route=nowhere decision


async def test_decide_save_shows_path_and_diff_first(make_app: AppFactory, spec_file: Path) -> None:
    """Item 14: ctrl+s shows the full path and a diff; nothing is written until confirmed."""
    from console.widgets.confirm import AskText, ConfirmDiff

    app = make_app(initial="decide", specs=(str(spec_file),))
    before = spec_file.read_text(encoding="utf-8")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        await pilot.press("i", *"fill the form")
        await until(pilot, lambda: pane.result is not None and pane.result.decision.route)
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, AskText) and str(spec_file.resolve()) in app.screen.detail
        await pilot.press(*"previewed", "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDiff))
        screen = app.screen
        assert isinstance(screen, ConfirmDiff)
        assert screen.path == str(spec_file.resolve())
        assert '+  - name: "previewed"' in screen.diff and screen.diff.startswith("---")
        assert spec_file.read_text(encoding="utf-8") == before
        await pilot.press("n")
        await pilot.pause(0.1)
        assert spec_file.read_text(encoding="utf-8") == before
        await pilot.press("ctrl+s", *"previewed", "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDiff))
        await pilot.press("y")
        await until(pilot, lambda: "2 passed" in text(app, "#decide-tests-text"))
        assert '- name: "previewed"' in spec_file.read_text(encoding="utf-8")


async def test_demo_ships_a_spec_and_removes_its_temp_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Item 15: --demo opens Decide on a bundled spec; a clean exit removes the temp store."""
    import console.app
    from console.context import ConsoleContext
    from engine.views.session import ConsoleOptions

    monkeypatch.setenv("HARNESS_CONFIG", str(tmp_path / "absent.toml"))
    options = ConsoleOptions.from_args(store=None, demo=True)
    assert options.temp_dir is not None and options.store_path.parent == options.temp_dir
    assert [p.name for p in options.spec_files()] == ["operator.spec.yml"]
    context = ConsoleContext(options, live=False, evaluate=False, cursor_blink=False)
    app = HarnessConsole(context, initial="decide", watch_files=False)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        assert "2 passed, 0 failed" in text(app, "#decide-tests-text")
    assert options.temp_dir.exists()

    monkeypatch.setattr(console.app.HarnessConsole, "run", lambda self: 0)
    assert console.app.run_console(options) == 0
    assert not options.temp_dir.exists()


async def test_backlog_progress_is_shown(tmp_path: Path, policy_dir: Path) -> None:
    """Item 10: while the acting evaluator (--act) works through a backlog, Rules says so."""
    from console.context import ConsoleContext
    from engine.config import HarnessConfig
    from engine.fleet.sim import write_fleet
    from engine.store.db import connect
    from engine.views.live import demo_config
    from engine.views.session import ConsoleOptions
    from tests.console.conftest import END_MS, START_MS

    store = tmp_path / "backlog.db"
    conn = connect(store)
    write_fleet(conn, days=1, start_ms=START_MS, end_ms=END_MS, validate=False)
    head = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    conn.close()
    options = ConsoleOptions(
        store_path=store, act=True, policy_dir=policy_dir, config=demo_config(HarnessConfig())
    )
    context = ConsoleContext(options, clock=lambda: END_MS, evaluate=True, cursor_blink=False)
    app = HarnessConsole(context, initial="rules", watch_files=False)
    seen: list[str] = []
    async with app.run_test(size=(160, 45)) as pilot:
        rules = app.query_one(RulesPane)

        def progress() -> bool:
            status = text(app, "#rules-status")
            if "evaluating backlog" in status:
                seen.append(status)
            return bool(seen)

        await until(pilot, progress, timeout=30)
        assert f"of {head:,}" in seen[0] and rules.backlog is not None


async def test_idle_console_does_not_reread_a_static_store(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    """Item 10: on a static store, timer refreshes cost a version probe, not the pane's read."""
    import console.panes.fleet
    import console.panes.holds
    from tests.console.test_panes import _add_fire

    calls = {"fleet": 0, "holds": 0}
    real_fleet = console.panes.fleet.fleet_summary
    real_holds = console.panes.holds.list_holds

    def fleet(*args: Any, **kwargs: Any) -> Any:
        calls["fleet"] += 1
        return real_fleet(*args, **kwargs)

    def holds(*args: Any, **kwargs: Any) -> Any:
        calls["holds"] += 1
        return real_holds(*args, **kwargs)

    monkeypatch.setattr(console.panes.fleet, "fleet_summary", fleet)
    monkeypatch.setattr(console.panes.holds, "list_holds", holds)
    app = make_app(initial="fleet")  # refresh_interval 0.5 s, live
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FleetPane)
        await until(pilot, lambda: pane.rows)
        await pilot.pause(0.3)
        first = dict(calls)
        await pilot.pause(2.5)  # five timer ticks
        assert calls == first  # nothing changed, nothing re-read; hidden Holds reads nothing
        await pilot.press("r")  # an explicit refresh still reads
        await until(pilot, lambda: calls["fleet"] > first["fleet"])
        read = dict(calls)
        _add_fire(store)  # the store moves: the shown pane re-reads, the hidden one waits
        await until(pilot, lambda: calls["fleet"] > read["fleet"], timeout=3)
        await pilot.pause(1.2)
        assert calls["holds"] == read["holds"]
        app.action_show_pane("holds")  # shown again: catches up at once
        await until(pilot, lambda: calls["holds"] > read["holds"], timeout=3)


def test_quiet_stepper_skips_sqlite_while_the_store_files_stand_still(tmp_path: Path) -> None:
    """Item 10: the embedded evaluator's empty steps do not touch SQLite on a static store."""
    from engine.views.live import IDLE_STEP, QuietStepper

    store = tmp_path / "s.db"
    store.write_bytes(b"x")
    steps: list[int] = []

    class Inner:
        def step(self, max_rows: int | None = None) -> object:
            steps.append(1)
            return IDLE_STEP

    quiet = QuietStepper(Inner(), store, max_skip_s=60)
    for _ in range(50):
        quiet.step()
    assert len(steps) == 1
    store.write_bytes(b"xy")  # a write: the next step reads
    quiet.step()
    assert len(steps) == 2
