"""Holds pane: active and recently released holds; release asks for a reason."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.markup import escape
from console.messages import OpenExplain
from console.panes.base import StorePane
from console.widgets.confirm import AskText
from console.widgets.table import TEXT, Column, FitTable
from engine.timefmt import short_ms
from engine.views.holds import HoldRow, list_holds, operator_name, release_hold


class HoldsPane(StorePane[list[HoldRow]]):
    """Active holds (newest first) and holds released in the last week, with who released them.

    A hold refuses new runs of its harness until the rule's window lets it go
    or an operator releases it here (the release records your login name and
    the reason you give).

    Keys: ``enter`` explain the fire that created the selected hold, ``x``
    release it (asks for a reason), ``r`` refresh.

    Messages: posts :class:`~console.messages.OpenExplain`; :class:`Released`
    comes back from the release worker; reads arrive as :class:`StorePane.Read`.
    """

    REFRESH_S = 0.0
    DEFAULT_CSS = """
    HoldsPane #holds-detail { height: auto; max-height: 4; padding: 0 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "explain", "Explain", tooltip="the fire that created the hold"),
        Binding("x", "release", "Release", tooltip="the selected hold; asks for a reason first"),
        Binding("r", "refresh", "Refresh", tooltip="read the store now"),
    ]

    class Released(Message):
        """The release worker committed: ``hold_id`` is released."""

        def __init__(self, hold_id: int) -> None:
            super().__init__()
            self.hold_id = hold_id

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[HoldRow] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="holds-status", classes="status-line")
        yield FitTable(
            [
                Column("id", "id", right=True),
                Column("harness", "harness", TEXT, least=6),
                Column("rule", "rule", TEXT, least=10),
                Column("since (UTC)", "since"),
                Column("state", "state"),
                Column("by", "by", TEXT, least=8),
                Column("reason", "reason", TEXT, least=12),
            ],
            id="holds-table",
            cursor_type="row",
            zebra_stripes=True,
        )
        yield Static("", id="holds-detail")

    def read(self, conn: sqlite3.Connection) -> list[HoldRow]:
        return list_holds(conn, now_ms=self.context.clock())

    def show(self, result: list[HoldRow]) -> None:
        if result == self.rows and self.query_one(FitTable).rows_shown:
            return
        self.rows = result
        cells = []
        for h in result:
            if h.active:
                state = Text("active", style="bold yellow")
            else:
                when = short_ms(h.released_at, seconds=False) if h.released_at else ""
                state = Text(f"released {when}")
            cells.append(
                (
                    f"{h.id:,}",
                    h.harness,
                    h.rule,
                    short_ms(h.created_at, seconds=False),
                    state,
                    h.released_by or "",
                    h.release_reason or h.reason,
                )
            )
        self.query_one(FitTable).show(cells, [str(h.id) for h in result])
        active = sum(1 for h in result if h.active)
        self.query_one("#holds-status", Static).update(
            f"{active:,} active, {len(result) - active:,} recently released"
        )

    def selected(self) -> HoldRow | None:
        table = self.query_one(FitTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_explain()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The selected hold's reason in full below the table (the column may be shortened)."""
        event.stop()
        hold = self.selected()
        detail = self.query_one("#holds-detail", Static)
        if hold is None:
            detail.update("")
            return
        said = hold.release_reason or hold.reason
        who = f" · released by {hold.released_by}" if hold.released_by else ""
        detail.update(escape(f"hold {hold.id:,} on {hold.harness} ({hold.rule}){who}: {said}"))

    def action_explain(self) -> None:
        """Enter: the fire that created the selected hold, in Explain."""
        hold = self.selected()
        if hold is None:
            return
        if hold.fire_id is None:
            self.app.notify(f"hold {hold.id} records no fire that created it", severity="warning")
            return
        self.post_message(OpenExplain(hold.fire_id))

    async def action_release(self) -> None:
        """``x``: ask for a reason, then release in a worker (the view's one release)."""
        hold = self.selected()
        if hold is None:
            return
        if not hold.active:
            self.app.notify(f"hold {hold.id} is already released", severity="warning")
            return

        def done(reason: str | None) -> None:
            if reason is not None:
                self._release(hold.id, reason)

        await self.app.push_screen(
            AskText(
                f"Release hold {hold.id} on {hold.harness}?",
                detail=f"rule {hold.rule}: {hold.reason} (recorded as released by "
                f"{operator_name()})",
                placeholder="reason (required)",
                ok_label="Release",
            ),
            done,
        )

    @work(thread=True, group="holds-release")
    def _release(self, hold_id: int, reason: str) -> None:
        now = self.context.clock()
        if self.with_store(lambda c: release_hold(c, hold_id, reason=reason, now_ms=now)):
            self.post_message(self.Released(hold_id))

    def on_holds_pane_released(self, message: Released) -> None:
        self.app.notify(f"hold {message.hold_id} released")
        self.action_refresh()
