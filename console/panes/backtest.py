"""Backtest pane: pick or edit a rule, run it over recorded history in a worker."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static, TextArea

from console.context import ConsoleContext


class BacktestPane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run backtest"),
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(classes="pane")
        self.context = context
        self.rule_name = ""

    def compose(self) -> ComposeResult:
        yield Static("pick a rule in the Rules pane and press b", id="backtest-status")
        yield TextArea("", id="backtest-editor", language="yaml")

    def select_rule(self, name: str) -> None:
        self.rule_name = name
        self.query_one("#backtest-status", Static).update(f"rule {name}")

    def action_run(self) -> None:
        self.app.notify("backtest: not wired yet", severity="warning")

    def action_cancel(self) -> None:
        pass
