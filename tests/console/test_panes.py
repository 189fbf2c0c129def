"""Pilot tests: each pane's main interaction against a real engine-built store."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable, Input, Static, TabbedContent

from console.help import HelpScreen
from console.panes.backtest import BacktestPane
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import WINDOW, FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.rules import RulesPane
from console.widgets.confirm import AskText, ConfirmDiff
from engine.store.db import connect
from engine.views.fires import FireFilter, fires_before
from engine.views.holds import operator_name
from tests.console.conftest import AppFactory, until


def _text(app: object, selector: str) -> str:
    return str(app.query_one(selector, Static).render())  # type: ignore[attr-defined]


_COUNTER = iter(range(1, 1_000_000))


def _add_fire(store: Path, level: str = "annotate") -> int:
    """Commit a fire the way the evaluator does (one row in rule_fires)."""
    rule = f"test_rule_{next(_COUNTER)}"
    conn = connect(store)
    seq = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    cur = conn.execute(
        "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level, status,"
        " reasons, calls) VALUES (?, 'h', ?, 1772467500000, 'h01', ?, ?, 'fired', '[]', '[]')",
        (rule, seq, level, level),
    )
    conn.close()
    return int(cur.lastrowid or 0)


async def test_fires_tail_shows_commit_pauses_and_jumps_back(
    make_app: AppFactory, store: Path
) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        new_id = _add_fire(store)
        # the commit reaches the screen by itself (how fast is the console benchmark's
        # commit-to-screen p99, not a wall-clock assertion that fails on a busy machine)
        await until(pilot, lambda: pane.window[-1].id == new_id)
        table = app.query_one("#fires-table", DataTable)
        assert table.cursor_row == len(pane.window) - 1
        await pilot.press("up")
        await until(pilot, lambda: not pane.following)
        second = _add_fire(store)
        await until(pilot, lambda: pane.new_count == 1)
        assert "1 new" in _text(app, "#fires-badge")
        assert pane.window[-1].id == new_id
        await pilot.press("end")
        await until(pilot, lambda: pane.following and pane.window[-1].id == second)
        assert "new" not in _text(app, "#fires-badge")


async def test_fires_filter_and_bad_filter(make_app: AppFactory, store: Path) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        await pilot.press("slash", *"level:hold", "enter")
        await until(pilot, lambda: pane.flt.level == "hold" and pane.window)
        conn = connect(store)
        want = [f.id for f in fires_before(conn, FireFilter(level="hold"), None, 100)]
        await until(pilot, lambda: [f.id for f in pane.window] == want)
        await pilot.press("slash")
        box = app.query_one("#fires-filter", Input)
        box.value = ""
        await pilot.press(*"colour:red", "enter")
        await until(pilot, lambda: any("colour" in n.message for n in app._notifications))
        assert pane.flt.level == "hold"  # the bad filter changed nothing


async def test_fires_window_stays_bounded_while_paging(make_app: AppFactory, store: Path) -> None:
    conn = connect(store)
    seq = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    conn.executemany(
        "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level, status,"
        " reasons, calls) VALUES (?, 'h', ?, 1772467500000, 'h02', 'annotate', 'annotate',"
        " 'fired', '[]', '[]')",
        [(f"bulk_{i}", seq) for i in range(WINDOW * 3)],
    )
    conn.close()
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: len(pane.window) == WINDOW)
        newest_first = pane.window[0].id
        for _ in range(30):
            await pilot.press("pageup")
        await pilot.press("ctrl+home")
        await until(pilot, lambda: pane.window[0].id < newest_first)
        assert len(pane.window) <= WINDOW
        assert not pane.following and pane.has_newer
        ids = [f.id for f in pane.window]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)


async def test_enter_opens_explain_and_steps(make_app: AppFactory) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        target = pane.window[-1]
        await pilot.press("enter")
        explain = app.query_one(ExplainPane)
        await until(pilot, lambda: explain.explanation is not None)
        assert app.query_one("#panes", TabbedContent).active == "explain"
        assert explain.explanation is not None and explain.explanation.fire_id == target.id
        assert "step 1 of" in _text(app, "#explain-title")
        await pilot.press("right", "right")
        assert explain.step == 2
        await pilot.press("left")
        assert explain.step == 1
        titles = [s.kind for s in explain.explanation.steps]
        assert titles[0] == "event" and "decision" in titles


async def test_copy_fire_as_json(make_app: AppFactory) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        await pilot.press("c")
        doc = json.loads(app.clipboard)
        assert doc["id"] == pane.window[-1].id
        assert doc["rule"] == pane.window[-1].rule


async def test_fleet_lists_harnesses_with_states(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FleetPane)
        await until(pilot, lambda: len(pane.rows) == 12)
        states = {r.harness: r.state for r in pane.rows}
        assert states["h05"] == "held"
        assert "12 harnesses" in _text(app, "#fleet-status")
        table = app.query_one("#fleet-table", DataTable)
        table.move_cursor(row=4)
        await pilot.press("enter")
        fires = app.query_one(FiresPane)
        await until(pilot, lambda: fires.flt.harness == "h05")
        assert app.query_one("#panes", TabbedContent).active == "fires"


async def test_rules_states_source_and_backtest_jump(make_app: AppFactory) -> None:
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(RulesPane)
        await until(pilot, lambda: pane.rows)
        by_name = {r.name: r for r in pane.rows}
        assert by_name["loop_guard_repeated"].state == "shadow"
        assert by_name["restart_same_error"].state == "enforced"
        index = [r.name for r in pane.rows].index("restart_same_error")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("enter")
        source = _text(app, "#rules-source-text")
        assert "count({" in source
        assert "acts at notify until the operator enforces it" in source
        index = [r.name for r in pane.rows].index("file_collision")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("enter")
        assert "lint: clean" in _text(app, "#rules-source-text")
        index = [r.name for r in pane.rows].index("restart_same_error")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("b")
        backtest = app.query_one(BacktestPane)
        await until(pilot, lambda: backtest.rule_name == "restart_same_error")
        assert app.query_one("#panes", TabbedContent).active == "backtest"


async def test_holds_release_requires_a_reason(make_app: AppFactory, store: Path) -> None:
    app = make_app(initial="holds")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(HoldsPane)
        await until(pilot, lambda: pane.rows)
        hold = pane.rows[0]
        assert hold.active
        await pilot.press("x")
        assert isinstance(app.screen, AskText)
        await pilot.press("enter")
        assert isinstance(app.screen, AskText)  # empty reason refused
        assert "required" in str(app.screen.query_one("#ask-error", Static).render())
        await pilot.press(*"fixed the config", "enter")
        await until(pilot, lambda: pane.rows and not pane.rows[0].active)
        row = (
            connect(store)
            .execute("SELECT released_by, release_reason FROM rule_holds WHERE id = ?", (hold.id,))
            .fetchone()
        )
        assert row == (operator_name(), "fixed the config")  # the login name, not "operator"


async def test_holds_release_cancel_keeps_hold(make_app: AppFactory, store: Path) -> None:
    app = make_app(initial="holds")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(HoldsPane)
        await until(pilot, lambda: pane.rows)
        await pilot.press("x", "escape")
        await pilot.pause(0.2)
        active = (
            connect(store)
            .execute("SELECT COUNT(*) FROM rule_holds WHERE released_at IS NULL")
            .fetchone()[0]
        )
        assert active == 1


async def test_decide_as_you_type_and_save(make_app: AppFactory, spec_file: Path) -> None:
    app = make_app(initial="decide", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        assert "1 passed, 0 failed" in _text(app, "#decide-tests-text")
        await pilot.press("i", *"fill the form")
        await until(pilot, lambda: pane.result is not None and pane.result.decision.route)
        decision = _text(app, "#decide-decision-text")
        assert "fill_pdf_form" in decision and "rule_prefer" in decision
        assert "guess_field_names" in decision
        rules = _text(app, "#decide-rules-text")
        assert "form_requests_fill" in rules and "fill the form" in rules
        await pilot.press("backspace", *"x")
        await until(pilot, lambda: pane.result is not None and not pane.result.decision.forbid)
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, AskText)
        await pilot.press("escape")
        assert "console saved" not in spec_file.read_text(encoding="utf-8")
        app.query_one("#decide-input", Input).value = "fill the form"
        await until(pilot, lambda: pane.result is not None and pane.result.decision.forbid)
        await pilot.press("ctrl+s", *"console saved", "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDiff))
        await pilot.press("y")
        await until(pilot, lambda: "2 passed" in _text(app, "#decide-tests-text"))
        text = spec_file.read_text(encoding="utf-8")
        assert "# form requests go to the form route" in text
        assert '- name: "console saved"' in text


async def test_backtest_runs_and_compares_an_edit(make_app: AppFactory) -> None:
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        index = [r.name for r in rules.rows].index("verify_same_failure")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("b")
        pane = app.query_one(BacktestPane)
        await until(pilot, lambda: pane.candidate is not None)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None, timeout=20)
        assert pane.last_run is not None
        base = pane.last_run
        assert base.baseline is None and base.result.fires
        assert app.query_one("#backtest-fires", DataTable).row_count == len(base.result.fires)
        editor = app.query_one("#backtest-editor")
        editor.load_text(editor.text.replace(">= 3", ">= 2"))  # type: ignore[attr-defined]
        await until(pilot, lambda: "will compare" in _text(app, "#backtest-lint"))
        pane.last_run = None
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None, timeout=20)
        edited = pane.last_run
        assert edited is not None and edited.baseline is not None
        assert len(edited.gained) >= 1
        assert "gained" in _text(app, "#backtest-text")
        editor.load_text("name: broken\non: run_event\nwhen: event.nope == 1\n")  # type: ignore[attr-defined]
        await until(pilot, lambda: pane.candidate is None)
        assert ":" in _text(app, "#backtest-lint")


async def test_help_theme_and_palette(make_app: AppFactory) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen) and app.screen.pane == "fires"
        await pilot.press("escape")
        dark = app.theme
        await pilot.press("ctrl+t")
        assert app.theme != dark
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to Backtest" in titles and "Toggle light/dark" in titles
        await pilot.press("3")
        assert app.query_one("#panes", TabbedContent).active == "rules"


async def test_decide_file_picker_opens_a_spec(make_app: AppFactory, spec_file: Path) -> None:
    from console.widgets.picker import PickSpec, YamlTree

    (spec_file.parent / "notes.txt").write_text("not a spec", encoding="utf-8")
    app = make_app(initial="decide")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await pilot.press("ctrl+o")
        assert isinstance(app.screen, PickSpec)
        tree = app.screen.query_one(YamlTree)
        listed = [Path(p).name for p in tree.filter_paths(spec_file.parent.iterdir())]
        assert listed == ["skill.spec.yml"]
        app.screen.dismiss(spec_file)
        await until(pilot, lambda: pane.spec is not None)
        assert pane.loaded_path == spec_file.resolve()


async def test_f1_help_is_per_pane(make_app: AppFactory) -> None:
    """F1 shows the pane's own section: what its docstring says it shows, and its keys."""
    from console.app import PANES
    from console.panes.base import about

    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        for spec in PANES:
            app.action_show_pane(spec.id)
            await pilot.pause(0.05)
            await pilot.press("f1")
            assert isinstance(app.screen, HelpScreen) and app.screen.pane == spec.id
            assert [s.id for s in app.screen.sections] == [spec.id]
            section = app.screen.sections[0]
            assert section.title == spec.title and section.about == about(spec.cls)
            assert section.about  # every pane says what it shows
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)
