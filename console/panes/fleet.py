"""Fleet pane: every harness with state, project, last event age, fires in 24h, sparkline."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from console.context import ConsoleContext
from console.messages import ShowPane
from console.panes.base import StorePane
from console.widgets.spark import sparkline
from engine.views.fleet import HarnessSummary, fleet_summary, format_age

STATE_STYLE = {"running": "green", "idle": "dim", "held": "bold yellow", "stopped": "bold red"}


class FleetPane(StorePane):
    """Refreshes from a thread worker every ``refresh_interval`` seconds."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "refresh", "Refresh"),
        Binding("enter", "fires_for", "Fires of harness", show=False),
    ]

    class Updated(Message):
        def __init__(self, rows: list[HarnessSummary]) -> None:
            super().__init__()
            self.rows = rows

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[HarnessSummary] = []
        #: The activity scale, stale threshold and cells on screen (an update that
        #: changes none of them is skipped).
        self._on_screen: tuple[int, str, list[tuple[str, ...]]] | None = None
        #: Times the table was rebuilt (for tests).
        self.renders = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-status", classes="status-line")
        table: DataTable[str] = DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        for label in ("harness", "state", "project", "last event", "fires 24h"):
            table.add_column(label)
        table.add_column("activity 24h", key="activity")
        yield table

    def on_mount(self) -> None:
        self.action_refresh()
        if self.context.live:
            self.poll_every(self.context.refresh_interval)

    def poll(self) -> None:
        self._load()

    def poll_key(self) -> tuple[int, ...]:
        # ages and staleness move with the clock and the config, not only with the store
        return (self.context.clock() // 60_000, self.context.current_config.console_stale_after_ms)

    def action_refresh(self) -> None:
        self._load(force=True)

    @work(thread=True, exclusive=True, group="fleet")
    def _load(self, force: bool = False) -> None:
        now = self.context.clock()
        stale = self.context.current_config.console_stale_after_ms
        rows = self.with_store_if_changed(
            lambda conn: fleet_summary(conn, now, stale_after_ms=stale),
            extra=(now // 60_000, stale),  # ages and staleness move with the clock
            force=force,
        )
        if rows is not None:
            self.post_message(self.Updated(rows))

    def on_fleet_pane_updated(self, message: Updated) -> None:
        self.rows = message.rows
        # one scale for the whole screen, so rows compare (said in the column header)
        top = max((max(r.activity, default=0) for r in message.rows), default=0)
        cells = [self._cells(r, top) for r in message.rows]
        after = format_age(self.context.current_config.console_stale_after_ms)
        if (top, after, cells) == self._on_screen:
            # the minute moved but no age reads differently: repainting the table
            # was most of an idle console's CPU
            return
        self._on_screen = (top, after, cells)
        self.renders += 1
        table = self.query_one("#fleet-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        table.columns[ColumnKey("activity")].label = Text(
            f"activity 24h (█ = {top}/h)" if top else "activity 24h"
        )
        for r, row in zip(message.rows, cells, strict=True):
            table.add_row(*row, key=r.harness)
        if message.rows:
            table.move_cursor(row=min(cursor, len(message.rows) - 1))
        counts: dict[str, int] = {}
        for r in message.rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        stale = sum(1 for r in message.rows if r.stale)
        self.query_one("#fleet-status", Static).update(
            f"{len(message.rows)} harnesses"
            + (f": {summary}" if summary else "")
            + (
                f" · {stale} stale (running, silent > {after}; \\[console] stale_after)"
                if stale
                else ""
            )
        )

    @staticmethod
    def _cells(r: HarnessSummary, top: int) -> tuple[str, ...]:
        style = STATE_STYLE.get(r.state, "")
        state = f"[{style}]{r.state}[/]" if style else r.state
        if r.stale:
            state = f"[bold magenta]stale[/] [dim]{r.state}[/]"
        return (
            r.harness,
            state,
            r.project,
            format_age(r.last_age_ms),
            str(r.fires_24h) if r.fires_24h else "",
            sparkline(r.activity, top),
        )

    def action_fires_for(self) -> None:
        table = self.query_one("#fleet-table", DataTable)
        if not self.rows or table.cursor_row >= len(self.rows):
            return
        harness = self.rows[table.cursor_row].harness
        from console.panes.fires import FiresPane

        self.app.query_one(FiresPane).set_filter_text(f"harness:{harness}")
        self.post_message(ShowPane("fires"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_fires_for()
