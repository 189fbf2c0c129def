"""Backtest pane: cancel from anywhere, no diff from a cut-short run, gained/lost rows, parity."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from textual.widgets import DataTable, Static, TabbedContent, TextArea

import engine.views.backtest as views_backtest
from console.panes.backtest import BacktestPane
from console.panes.explain import ExplainPane
from console.panes.rules import RulesPane
from tests.console.conftest import AppFactory, until


def _text(app: Any, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


async def _open(app: Any, pilot: Any, rule: str = "verify_same_failure") -> BacktestPane:
    rules = app.query_one(RulesPane)
    await until(pilot, lambda: rules.rows)
    index = [r.name for r in rules.rows].index(rule)
    app.query_one("#rules-table", DataTable).move_cursor(row=index)
    await pilot.press("b")
    pane: BacktestPane = app.query_one(BacktestPane)
    await until(pilot, lambda: pane.candidate is not None)
    return pane


async def test_ctrl_x_in_the_editor_cancels_and_never_cuts(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = views_backtest.backtest_with_lifecycle
    started = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        cancel = kwargs["cancel"]
        cancel.wait(5)  # a long run: only a cancel ends it early
        return real(*args, **kwargs)

    monkeypatch.setattr(views_backtest, "backtest_with_lifecycle", slow)
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await _open(app, pilot)
        editor = app.query_one("#backtest-editor", TextArea)
        before = editor.text
        editor.focus()
        await pilot.press("ctrl+r")
        await until(pilot, started.is_set)
        assert pane.running and app.focused is editor
        await pilot.press("ctrl+x")
        assert pane.cancel.is_set()
        assert editor.text == before
        await until(pilot, lambda: not pane.running)
        assert editor.text == before and not editor.read_only
        # with no run going, ctrl+x is the editor's cut again
        await pilot.press("ctrl+x")
        assert editor.text != before


async def test_cancel_from_the_range_input_too(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = views_backtest.backtest_with_lifecycle

    def slow(*args: Any, **kwargs: Any) -> Any:
        kwargs["cancel"].wait(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(views_backtest, "backtest_with_lifecycle", slow)
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await _open(app, pilot)
        await pilot.press("ctrl+r")
        app.query_one("#backtest-since").focus()
        await pilot.press("ctrl+x")
        assert pane.cancel.is_set()
        await until(pilot, lambda: pane.last_run is not None)
        assert "cancelled" in _text(app, "#backtest-text")


async def test_a_run_cancelled_during_the_baseline_shows_no_diff(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = views_backtest.backtest_with_lifecycle
    calls: list[int] = []

    def cancel_second(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the baseline replay of the current version
            kwargs["cancel"].set()
        return real(*args, **kwargs)

    monkeypatch.setattr(views_backtest, "backtest_with_lifecycle", cancel_second)
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await _open(app, pilot)
        editor = app.query_one("#backtest-editor", TextArea)
        editor.load_text(editor.text.replace(">= 3", ">= 2"))
        await until(pilot, lambda: "will compare" in _text(app, "#backtest-lint"))
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None)
        text = _text(app, "#backtest-text")
        assert len(calls) == 2
        assert "cancelled" in text
        assert "gained" not in text and "lost" not in text and "before" not in text
        assert app.query_one("#backtest-fires", DataTable).row_count == 0


async def test_gained_and_lost_rows_are_marked_and_enter_explains_one(
    make_app: AppFactory,
) -> None:
    app = make_app(initial="rules")
    async with app.run_test(size=(140, 40)) as pilot:
        pane = await _open(app, pilot)
        editor = app.query_one("#backtest-editor", TextArea)
        editor.load_text(editor.text.replace(">= 3", ">= 4"))  # stricter: loses fires
        await until(pilot, lambda: "will compare" in _text(app, "#backtest-lint"))
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None)
        run = pane.last_run
        assert run is not None and run.lost and not run.cancelled
        table = app.query_one("#backtest-fires", DataTable)
        marks = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert sum("lost" in m for m in marks) == len(run.lost)
        assert table.row_count == len(run.result.fires) + len(run.lost)
        assert all("lost" in m for m in marks[len(run.result.fires) :])
        assert "listed last" in _text(app, "#backtest-text")
        table.focus()
        table.move_cursor(row=table.row_count - 1)
        await pilot.press("enter")
        explain = app.query_one(ExplainPane)
        await until(pilot, lambda: explain.explanation is not None)
        assert app.query_one("#panes", TabbedContent).active == "explain"
        assert explain.explanation is not None
        assert explain.explanation.rule == "verify_same_failure"
        assert "backtest fire" in _text(app, "#explain-title")
        lost_seq = run.lost[-1].seq
        assert any(f"seq {lost_seq}" in s.title for s in explain.explanation.steps)


async def test_parity_stamp_says_live_equals_backtest(make_app: AppFactory) -> None:
    app = make_app(initial="rules")
    async with app.run_test(size=(140, 40)) as pilot:
        pane = await _open(app, pilot)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None)
        run = pane.last_run
        assert run is not None and run.parity is not None and run.parity.equal
        text = _text(app, "#backtest-text")
        assert f"live = backtest ({len(run.result.fires)} fires, digest" in text
