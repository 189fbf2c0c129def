"""Rules pane: each rule's source, levels, state and counts; source with lint; backtest it."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.messages import OpenBacktest
from console.panes.base import StorePane
from engine.rules.model import LoadResult
from engine.timefmt import short_ms
from engine.views.rules import (
    FireCounter,
    RuleRow,
    keep_last_good,
    lint_lines,
    load_console_rules,
    rule_rows,
)

STATE_STYLE = {"active": "green", "shadow": "magenta", "disabled": "red", "enforced": "bold yellow"}


class RulesPane(StorePane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "view_source", "Source + lint"),
        Binding("b", "backtest", "Backtest"),
        Binding("e", "promote", "Promote (what if enforced)"),
        Binding("r", "refresh", "Refresh"),
        Binding("escape", "close_source", "Close source", show=False),
    ]
    DEFAULT_CSS = """
    RulesPane #rules-body { height: 1fr; }
    RulesPane #rules-table { width: 1fr; }
    RulesPane #rules-source { width: 50%; min-width: 64; border: round $primary; padding: 0 1; }
    """

    class Updated(Message):
        def __init__(self, result: LoadResult, rows: list[RuleRow]) -> None:
            super().__init__()
            self.result = result
            self.rows = rows

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.result: LoadResult | None = None
        self.rows: list[RuleRow] = []
        self.counter = FireCounter()
        #: The embedded evaluator's (cursor, head) while it is behind the journal, else None.
        self.backlog: tuple[int, int] | None = None
        self._summary = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="rules-status", classes="status-line")
        yield Static("", id="rules-errors", classes="error-box hidden")
        with Horizontal(id="rules-body"):
            table: DataTable[str] = DataTable(id="rules-table", cursor_type="row")
            table.add_columns("rule", "source", "level", "effective", "state", "fires", "suppr.")
            yield table
            with VerticalScroll(id="rules-source", classes="hidden"):
                yield Static("enter: view a rule's source and lint result", id="rules-source-text")

    def on_mount(self) -> None:
        self.action_refresh()
        if self.context.live:
            self.poll_every(max(self.context.refresh_interval, 5.0))

    def poll(self) -> None:
        self._load()

    def action_refresh(self) -> None:
        self._load(force=True)

    @work(thread=True, exclusive=True, group="rules")
    def _load(self, force: bool = False) -> None:
        config = self.context.current_config
        policy_dir = self.context.options.policy_dir

        def read(conn: sqlite3.Connection) -> tuple[LoadResult, list[RuleRow]]:
            # rule files are re-read on a forced refresh (the app forces one when they change)
            result = keep_last_good(self.result, load_console_rules(config, policy_dir))
            compiled = [c.rule for c in result.rules]
            return result, rule_rows(conn, compiled, config, self.counter)

        got = self.with_store_if_changed(read, force=force or self.result is None)
        if got is not None:
            self.post_message(self.Updated(*got))

    def on_rules_pane_updated(self, message: Updated) -> None:
        self.result = message.result
        errors = self.query_one("#rules-errors", Static)
        if message.result.errors:
            errors.update(
                escape(
                    "rule files with errors (the last good version of an override stays):\n"
                    + "\n".join(str(d) for d in message.result.errors[:6])
                )
            )
            errors.remove_class("hidden")
        else:
            errors.add_class("hidden")
        if message.rows == self.rows:
            return
        self.rows = message.rows
        table = self.query_one("#rules-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for r in message.rows:
            style = STATE_STYLE.get(r.state, "")
            state = r.state
            if r.shadow_until is not None:
                state = f"shadow until {short_ms(r.shadow_until)}"
            elif r.state == "disabled" and r.error:
                state = f"disabled: {escape(r.error[:40])}"
            table.add_row(
                r.name,
                r.source_kind,
                r.level,
                r.effective_level,
                f"[{style}]{state}[/]" if style else state,
                str(r.fires),
                str(r.suppressed),
                key=r.name,
            )
        if message.rows:
            table.move_cursor(row=min(cursor, len(message.rows) - 1))
        counts: dict[str, int] = {}
        for r in message.rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        self._summary = f"{len(message.rows)} rules: " + ", ".join(
            f"{n} {s}" for s, n in sorted(counts.items())
        )
        self._show_status()

    def show_backlog(self, cursor: int, head: int) -> None:
        """Say the evaluator is catching up (fire counts are still growing), or stop saying it."""
        was = self.backlog
        self.backlog = (cursor, head) if cursor < head else None
        if was is None and self.backlog is None:
            return  # the usual case while following a live store: nothing to say
        self._show_status()
        if self.backlog is None:
            self.action_refresh()  # just caught up: show the final counts now

    def _show_status(self) -> None:
        text = self._summary
        if self.backlog is not None:
            cursor, head = self.backlog
            text = f"[b yellow]evaluating backlog: seq {cursor:,} of {head:,}[/] · " + text
        self.query_one("#rules-status", Static).update(text)

    def selected(self) -> RuleRow | None:
        table = self.query_one("#rules-table", DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_view_source()

    def action_view_source(self) -> None:
        row = self.selected()
        if row is None or self.result is None:
            return
        rule = next((c.rule for c in self.result.rules if c.rule.name == row.name), None)
        if rule is None:
            return
        lint = lint_lines(self.result, rule.source_file)
        verdict = (
            "[green]lint: clean[/]"
            if not lint
            else "\n".join(f"[yellow]{escape(str(d))}[/]" for d in lint)
        )
        self.query_one("#rules-source").remove_class("hidden")
        self.query_one("#rules-source-text", Static).update(
            f"[b]{escape(rule.name)}[/b]  [dim](esc closes)[/dim]\n{escape(rule.source_file)}\n"
            f"hash {rule.hash[:16]} · cost {rule.static_cost} · {escape(row.state_detail)}\n"
            f"{verdict}\n\n{escape(rule.text)}"
        )

    def action_promote(self) -> None:
        """`e`: the promotion view for a rule not enforced today (never writes harness.toml)."""
        from console.panes.promotion import PromotionScreen

        row = self.selected()
        if row is None or self.result is None:
            return
        if row.state == "enforced":
            self.app.notify(f"{row.name} is already enforced: {row.state_detail}", timeout=5)
            return
        compiled = next((c for c in self.result.rules if c.rule.name == row.name), None)
        if compiled is not None:
            self.app.push_screen(PromotionScreen(self.context, compiled))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc closes the source panel when it is open; otherwise it goes back (the app's)."""
        if action == "close_source":
            return not self.query_one("#rules-source").has_class("hidden")
        return True

    def action_close_source(self) -> None:
        self.query_one("#rules-source").add_class("hidden")
        self.query_one("#rules-table").focus()

    def action_backtest(self) -> None:
        row = self.selected()
        if row is not None:
            self.post_message(OpenBacktest(row.name))
