"""Holds pane: active and recently released holds; release asks for a reason."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.messages import OpenExplain
from console.panes.base import StorePane
from console.widgets.confirm import AskText
from engine.timefmt import short_ms
from engine.views.holds import HoldRow, list_holds


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return short_ms(ms)


class HoldsPane(StorePane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "explain", "Explain its fire"),
        Binding("x", "release", "Release hold"),
        Binding("r", "refresh", "Refresh"),
    ]

    class Updated(Message):
        def __init__(self, rows: list[HoldRow]) -> None:
            super().__init__()
            self.rows = rows

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[HoldRow] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="holds-status", classes="status-line")
        table: DataTable[str] = DataTable(id="holds-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("id", "harness", "rule", "since (UTC)", "state", "released by", "reason")
        yield table
        yield Static("", id="holds-detail", classes="status-line")

    def on_mount(self) -> None:
        self.action_refresh()
        if self.context.live:
            self.poll_every(self.context.refresh_interval)

    def poll(self) -> None:
        self._load()

    def action_refresh(self) -> None:
        self._load(force=True)

    @work(thread=True, exclusive=True, group="holds")
    def _load(self, force: bool = False) -> None:
        now = self.context.clock()
        rows = self.with_store_if_changed(lambda conn: list_holds(conn, now_ms=now), force=force)
        if rows is not None:
            self.post_message(self.Updated(rows))

    def on_holds_pane_updated(self, message: Updated) -> None:
        if message.rows == self.rows:
            return
        self.rows = message.rows
        table = self.query_one("#holds-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for h in message.rows:
            state = "[bold yellow]active[/]" if h.active else f"released {_when(h.released_at)}"
            table.add_row(
                str(h.id),
                h.harness,
                h.rule,
                _when(h.created_at),
                state,
                h.released_by or "",
                escape(h.release_reason or h.reason),
                key=str(h.id),
            )
        if message.rows:
            table.move_cursor(row=min(cursor, len(message.rows) - 1))
        active = sum(1 for h in message.rows if h.active)
        self.query_one("#holds-status", Static).update(
            f"{active} active, {len(message.rows) - active} recently released"
        )

    def selected(self) -> HoldRow | None:
        table = self.query_one("#holds-table", DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_explain()

    def action_explain(self) -> None:
        """Enter: the fire that created the selected hold, in Explain."""
        hold = self.selected()
        if hold is None:
            return
        if hold.fire_id is None:
            self.app.notify(f"hold {hold.id} records no fire that created it", severity="warning")
            return
        self.post_message(OpenExplain(hold.fire_id))

    def action_release(self) -> None:
        hold = self.selected()
        if hold is None:
            return
        if not hold.active:
            self.app.notify(f"hold {hold.id} is already released", severity="warning")
            return

        def done(reason: str | None) -> None:
            if reason is not None:
                self._release(hold.id, reason)

        self.app.push_screen(
            AskText(
                f"Release hold {hold.id} on {hold.harness}?",
                detail=f"rule {hold.rule}: {hold.reason}",
                placeholder="reason (required)",
                ok_label="Release",
            ),
            done,
        )

    @work(thread=True, group="holds-release")
    def _release(self, hold_id: int, reason: str) -> None:
        from engine.rules.holds import release_by_operator
        from engine.store.txn import immediate

        now = self.context.clock()

        def release(conn: sqlite3.Connection) -> bool:
            with immediate(conn):
                release_by_operator(conn, hold_id, reason=reason, now_ms=now)
            return True

        if self.with_store(release) is None:
            return
        self.app.call_from_thread(self.app.notify, f"hold {hold_id} released")
        self.app.call_from_thread(self.action_refresh)
