"""Fleet pane: every harness with state, project, last event age, fires in 24h, sparkline."""

from __future__ import annotations

import sqlite3
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from console.context import ConsoleContext
from console.keys import Field, focus_now
from console.messages import ShowPane
from console.panes.base import StorePane
from console.widgets.spark import sparkline
from console.widgets.table import PATH, TEXT, Column, FitTable
from engine.views.fleet import HarnessSummary, fleet_summary, format_age

STATE_STYLE = {"running": "green", "idle": "dim", "held": "bold yellow", "stopped": "bold red"}
#: The orders ``s`` cycles through: (name, key of a row).
SORTS = ("harness", "state", "last event", "fires 24h")


def _sort_key(order: str, r: HarnessSummary) -> tuple[object, ...]:
    if order == "state":
        return (r.state, r.harness)
    if order == "last event":
        return (r.last_age_ms, r.harness)
    if order == "fires 24h":
        return (-r.fires_24h, r.harness)
    return (r.harness,)


class FleetPane(StorePane[list[HarnessSummary]]):
    """Every harness in the journal: state, project, age of its last event, fires in 24 hours.

    All rows share one activity scale (the status line says what █ is); a
    ``running`` harness silent longer than ``[console] stale_after`` shows as
    stale. Reads every ``refresh_interval`` while shown, when the store or the
    minute moved.

    Keys: ``r`` refresh, ``enter`` the harness's fires in Fires, ``/`` filter
    by a word of harness, state or project (``esc`` clears), ``s`` sort by the
    next column (harness, state, last event, fires 24h).

    Messages: posts :class:`~console.messages.ShowPane` to open Fires; reads
    arrive as :class:`StorePane.Read`.
    """

    REFRESH_S = 0.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "refresh", "Refresh", tooltip="read the store now"),
        Binding("enter", "fires_for", "Fires of harness", show=False),
        Binding("slash", "filter", "Filter", tooltip="a word of harness, state or project"),
        Binding("s", "sort", "Sort", tooltip="by harness, state, last event, fires 24h"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rows: list[HarnessSummary] = []
        self.all_rows: list[HarnessSummary] = []
        self.order = SORTS[0]
        self.word = ""
        #: The activity scale, stale threshold and cells on screen (an update that
        #: changes none of them is skipped).
        self._on_screen: tuple[object, ...] | None = None
        #: Times the table was rebuilt (for tests).
        self.renders = 0

    def compose(self) -> ComposeResult:
        yield Field(
            placeholder="filter: a word of harness, state or project (enter applies, esc clears)",
            id="fleet-filter",
            classes="hidden",
            on_enter=self._apply_filter,
        )
        yield Static("", id="fleet-status", classes="status-line")
        yield FitTable(
            [
                Column("harness", "harness", TEXT, least=6),
                Column("state", "state", TEXT, least=7),
                Column("project", "project", TEXT, least=6),
                Column("last event", "last"),
                Column("fires 24h", "fires", right=True),
                Column("activity 24h", "activity", PATH, least=8),
            ],
            id="fleet-table",
            cursor_type="row",
            zebra_stripes=True,
        )

    def poll_key(self) -> tuple[int, ...]:
        # ages and staleness move with the clock and the config, not only with the store
        return (self.context.clock() // 60_000, self.context.current_config.console_stale_after_ms)

    def read(self, conn: sqlite3.Connection) -> list[HarnessSummary]:
        now = self.context.clock()
        stale = self.context.current_config.console_stale_after_ms
        return fleet_summary(conn, now, stale_after_ms=stale)

    def show(self, result: list[HarnessSummary]) -> None:
        self.all_rows = result
        self._paint_rows()

    def _paint_rows(self, force: bool = False) -> None:
        word = self.word.lower()
        rows = [
            r
            for r in sorted(self.all_rows, key=lambda r: _sort_key(self.order, r))
            if not word or any(word in v.lower() for v in (r.harness, r.state, r.project))
        ]
        # one scale for the whole screen, so rows compare (said in the status line)
        top = max((max(r.activity, default=0) for r in self.all_rows), default=0)
        cells = [self._cells(r, top) for r in rows]
        after = format_age(self.context.current_config.console_stale_after_ms)
        shown = (top, after, self.order, self.word, [tuple(map(str, c)) for c in cells])
        self.rows = rows
        if shown == self._on_screen and not force:
            # the minute moved but no age reads differently: repainting the table
            # was most of an idle console's CPU
            return
        self._on_screen = shown
        self.renders += 1
        self.query_one(FitTable).show(cells, [r.harness for r in rows])
        self._status(rows, top, after)

    def _status(self, rows: list[HarnessSummary], top: int, after: str) -> None:
        counts: dict[str, int] = {}
        for r in self.all_rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        stale = sum(1 for r in self.all_rows if r.stale)
        parts = [f"{len(self.all_rows)} harnesses" + (f": {summary}" if summary else "")]
        if stale:
            parts.append(f"{stale} stale (running, silent > {after}; \\[console] stale_after)")
        if top:
            parts.append(f"activity █ = {top:,}/h")
        if self.word:
            parts.append(f"[reverse] filter {self.word} [/] {len(rows)} shown, esc clears")
        if self.order != SORTS[0]:
            parts.append(f"sorted by {self.order}")
        self.query_one("#fleet-status", Static).update(" · ".join(parts))

    @staticmethod
    def _cells(r: HarnessSummary, top: int) -> tuple[str | Text, ...]:
        style = STATE_STYLE.get(r.state, "")
        state = Text(r.state, style=style)
        if r.stale:
            state = Text.assemble(("stale", "bold magenta"), " ", (r.state, "dim"))
        return (
            r.harness,
            state,
            r.project,
            format_age(r.last_age_ms),
            f"{r.fires_24h:,}" if r.fires_24h else "",
            sparkline(r.activity, top),
        )

    def action_sort(self) -> None:
        """``s``: sort by the next column."""
        self.order = SORTS[(SORTS.index(self.order) + 1) % len(SORTS)]
        self._paint_rows(force=True)

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Field)
        box.remove_class("hidden")
        focus_now(box)

    def _apply_filter(self, text: str) -> None:
        self.word = text.strip()
        self.query_one("#fleet-filter").add_class("hidden")
        focus_now(self.query_one(FitTable))
        self._paint_rows(force=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc clears only when there is a filter (box open or applied); else it goes back."""
        if action == "clear_filter":
            return bool(self.word) or not self.query_one("#fleet-filter").has_class("hidden")
        return True

    def action_clear_filter(self) -> None:
        self.query_one("#fleet-filter", Field).value = ""
        self._apply_filter("")

    def action_fires_for(self) -> None:
        table = self.query_one(FitTable)
        if not self.rows or table.cursor_row >= len(self.rows):
            return
        harness = self.rows[table.cursor_row].harness
        from console.panes.fires import FiresPane

        self.app.query_one(FiresPane).set_filter_text(f"harness:{harness}")
        self.post_message(ShowPane("fires"))

    def on_data_table_row_selected(self, event: FitTable.RowSelected) -> None:
        event.stop()
        self.action_fires_for()
