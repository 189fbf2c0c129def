"""Fires pane: a live tail of fires that never holds more than a window of rows.

The table is a sliding window (at most ``WINDOW`` rows) over the keyset-paged
queries of ``engine.views.fires``; reaching its top loads the page before it,
reaching its bottom the page after it. So scrolling through a million fires
costs one page of memory. An async worker polls the store with aiosqlite (no
blocking on the UI thread) while following; scrolling up pauses the tail and
the poll only counts the new fires for the "N new" badge. The poll backs off
while the store stands still (a stat every ``TAIL_IDLE_S`` at most) and the app
pokes it when the embedded evaluator has stored a batch, so an idle console
costs nothing and the console's own fires still show at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from typing import ClassVar, cast

import aiosqlite
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import DataTable, Static
from textual.worker import Worker

from console.context import ConsoleContext
from console.keys import Field, focus_now
from console.markup import escape
from console.messages import OpenExplain
from console.panes.base import StorePane
from console.widgets.fires_table import FiresTable
from console.widgets.table import PATH, TEXT, Column
from engine.errors import HarnessError
from engine.timefmt import short_ms
from engine.views.changes import Backoff, file_stamp
from engine.views.fires import (
    LEVELS,
    FireFilter,
    FireRow,
    after_query,
    before_query,
    count_after_query,
    parse_filter,
    row_from_tuple,
)

WINDOW = 400
PAGE = 100
#: The longest the tail waits between looks at a store that stands still: the bound
#: on how late a fire written by another process shows after a quiet spell.
TAIL_IDLE_S = 0.5
#: How each level is drawn (the level words come from the rule vocabulary).
LEVEL_STYLE = dict(zip(LEVELS, ("dim", "cyan", "bold yellow", "bold red"), strict=True))
COLUMNS = (
    Column("id", "id", right=True),
    Column("at (UTC)", "at"),
    Column("rule", "rule", TEXT, least=10),
    Column("level", "level", TEXT, least=6),
    Column("status", "status"),
    Column("target", "target", PATH, least=10),
)


class FiresPane(StorePane[None]):
    """The live tail of rule fires, newest at the bottom; scrolling up pauses it.

    A sliding window of at most ``WINDOW`` rows over keyset-paged queries; a
    badge counts new fires while paused.

    Keys: ``/`` filter (a bare word matches part of the rule, harness, target
    or status; ``rule:NAME level:hold status:shadow harness:H`` match
    exactly), ``esc`` clears it, ``end``/``G`` follow the tail again,
    ``enter`` explain the fire, ``c`` copy it as JSON.

    Messages: posts :class:`~console.messages.OpenExplain`; listens to
    :class:`FiresTable.Moved` and :class:`FiresTable.JumpBack`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash", "filter", "Filter", tooltip="words; rule:NAME level:hold status:S harness:H"
        ),
        Binding("end,G", "jump_back", "Follow", tooltip="back to the live tail"),
        Binding("c", "copy", "Copy", tooltip="the selected fire as JSON, over OSC 52"),
        Binding("enter", "explain", "Explain", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.flt = FireFilter()
        self.window: list[FireRow] = []
        self.following = True
        self.has_newer = False
        self.has_older = True
        self.head_id = 0
        self.new_count = 0
        self._loading = False
        #: True once the first page for the current filter has been read.
        self.loaded = False
        self._tail_worker: Worker[None] | None = None
        #: Set to make the tail look at the store now (see :meth:`poke`).
        self._poke = asyncio.Event()
        #: The tail's pace: how long it waits before its next look.
        self.pace = Backoff(
            self.context.poll_interval, max(self.context.poll_interval, TAIL_IDLE_S)
        )
        #: Looks at the store (stats) the tail has made, for tests of its pacing, and the last.
        self.looks = 0
        self._looked_at = 0.0

    def compose(self) -> ComposeResult:
        yield Field(
            placeholder="filter: words; rule:NAME level:hold status:S harness:H (esc clears)",
            id="fires-filter",
            classes="hidden",
            on_enter=self._submit_filter,
        )
        with Horizontal(classes="status-line", id="fires-bar"):
            yield Static("", id="fires-status")
            yield Static("", id="fires-badge")
        yield FiresTable(COLUMNS, id="fires-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self._start()

    async def on_unmount(self) -> None:
        """Stop the tail while the event loop still runs, so aiosqlite's thread closes cleanly."""
        worker = self._tail_worker
        if worker is not None and not worker.is_finished:
            worker.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await worker.wait()

    # -- loading -------------------------------------------------------------

    def _start(self) -> None:
        """(Re)load the newest window for the current filter and follow the tail."""
        self.window = []
        self.following = True
        self.has_newer = False
        self.has_older = True
        self.head_id = 0
        self.new_count = 0
        self.loaded = False
        self._tail_worker = self._tail()

    @work(exclusive=True, group="fires-tail")
    async def _tail(self) -> None:
        """Follow the store; a failing read is shown and retried, never fatal."""
        while True:
            try:
                await self._tail_once()
                return
            except NoMatches:
                return  # the pane is being removed (the app is closing)
            except (sqlite3.Error, OSError) as exc:
                self.query_one("#fires-status", Static).update(f"store not readable: {exc}")
                await asyncio.sleep(1.0)

    async def _tail_once(self) -> None:
        flt = self.flt
        async with aiosqlite.connect(self.context.store_path) as db:
            sql, params = before_query(flt, None, WINDOW)
            rows = [row_from_tuple(r) for r in await db.execute_fetchall(sql, params)]
            rows.reverse()
            self.window = rows
            self.head_id = rows[-1].id if rows else 0
            self.has_older = len(rows) == WINDOW
            self._render_window(len(rows) - 1)
            self.loaded = True
            seen: tuple[object, ...] = ()
            while True:
                await self._wait(self.pace.delay)
                # a stat per look; SQLite only when the store's files (or the mode) moved
                self.looks += 1
                self._looked_at = time.monotonic()
                now = (file_stamp(self.context.store_path), self.following, self.has_newer)
                self.pace.saw(now != seen)
                if now == seen:
                    continue
                seen = now
                if self.following and not self.has_newer:
                    sql, params = after_query(flt, self.head_id, PAGE * 5)
                    fresh = [row_from_tuple(r) for r in await db.execute_fetchall(sql, params)]
                    if fresh:
                        self._append(fresh)
                else:
                    sql, params = count_after_query(flt, self.head_id)
                    counted = cast(list[tuple[int]], await db.execute_fetchall(sql, params))
                    (count,) = counted[0]
                    if count != self.new_count:
                        self.new_count = int(count)
                        self._update_status()
                if not self.context.live:
                    await asyncio.sleep(3600)

    async def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if :meth:`poke` is called meanwhile.

        Never less than the fast pace after the last look, though: a busy
        evaluator pokes after every batch, and reading the store that often
        took the UI thread from the screen.
        """
        if not self._poke.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), seconds)
        self._poke.clear()
        early = self._looked_at + self.pace.fast - time.monotonic()
        if early > 0:
            await asyncio.sleep(early)

    def poke(self) -> None:
        """Look at the store now (the app calls it when its evaluator stored a batch)."""
        self.pace.changed()
        self._poke.set()

    def _append(self, fresh: list[FireRow]) -> None:
        table = self.query_one(FiresTable)
        table.append([self._cells(row) for row in fresh], [str(row.id) for row in fresh])
        self.window.extend(fresh)
        self.head_id = fresh[-1].id
        overflow = len(self.window) - WINDOW
        if overflow > 0:
            table.drop_first(overflow)
            self.window = self.window[overflow:]
            self.has_older = True
        table.move_cursor(row=len(self.window) - 1, animate=False)
        self._update_status()

    def _cells(self, row: FireRow) -> tuple[str | Text, ...]:
        level = row.effective_level
        if row.level != row.effective_level:
            level = f"{row.effective_level} (≤{row.level})"
        return (
            str(row.id),
            short_ms(row.at),
            row.rule,
            Text(level, style=LEVEL_STYLE.get(row.effective_level, "")),
            row.status,
            row.target or "",
        )

    def _render_window(self, cursor: int) -> None:
        table = self.query_one(FiresTable)
        table.show(
            [self._cells(row) for row in self.window],
            [str(row.id) for row in self.window],
            cursor=cursor,
        )
        self._update_status()

    def _update_status(self) -> None:
        mode = "following" if self.following and not self.has_newer else "paused"
        shown = f"{len(self.window)} shown"
        flt = escape(self.flt.describe())
        text = f"{mode} · {shown}" + (
            f" · [reverse] filter {flt} [/] esc clears, / edits" if flt else ""
        )
        self.query_one("#fires-status", Static).update(text)
        badge = self.query_one("#fires-badge", Static)
        if mode == "paused" and self.new_count:
            badge.update(f"  [reverse] {self.new_count} new [/] end: jump back")
        else:
            badge.update("")

    async def _load_older(self) -> None:
        if self._loading or not self.has_older or not self.window:
            return
        self._loading = True
        try:
            async with aiosqlite.connect(self.context.store_path) as db:
                sql, params = before_query(self.flt, self.window[0].id, PAGE)
                rows = [row_from_tuple(r) for r in await db.execute_fetchall(sql, params)]
            rows.reverse()
            if len(rows) < PAGE:
                self.has_older = False
            if not rows:
                return
            merged = rows + self.window
            if len(merged) > WINDOW:
                merged = merged[:WINDOW]
                self.has_newer = True
            self.window = merged
            self._render_window(len(rows))
        except (sqlite3.Error, OSError) as exc:  # shown; the next key reads again
            self.query_one("#fires-status", Static).update(f"store not readable: {exc}")
        finally:
            self._loading = False

    async def _load_newer(self) -> None:
        if self._loading or not self.has_newer or not self.window:
            return
        self._loading = True
        try:
            async with aiosqlite.connect(self.context.store_path) as db:
                sql, params = after_query(self.flt, self.window[-1].id, PAGE)
                rows = [row_from_tuple(r) for r in await db.execute_fetchall(sql, params)]
            if len(rows) < PAGE:
                self.has_newer = False
            if rows:
                self.head_id = max(self.head_id, rows[-1].id)
            cursor = self.query_one(FiresTable).cursor_row
            merged = self.window + rows
            drop = max(0, len(merged) - WINDOW)
            self.window = merged[drop:]
            self.has_older = self.has_older or drop > 0
            self._render_window(cursor - drop)
        except (sqlite3.Error, OSError) as exc:  # shown; the next key reads again
            self.query_one("#fires-status", Static).update(f"store not readable: {exc}")
        finally:
            self._loading = False

    # -- events ----------------------------------------------------------------

    async def on_fires_table_moved(self, message: FiresTable.Moved) -> None:
        if message.direction == "up":
            if self.following:
                self.following = False
                self.new_count = 0
                self._update_status()
                self.poke()  # count the new fires for the badge from now on
            if message.edge:
                await self._load_older()
        elif message.edge:
            if self.has_newer:
                await self._load_newer()
            elif not self.following:
                self.following = True
                self.new_count = 0
                self._update_status()
                self.poke()

    def on_fires_table_jump_back(self, message: FiresTable.JumpBack) -> None:
        self.action_jump_back()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(OpenExplain(int(event.row_key.value)))

    def action_explain(self) -> None:
        """``enter``: the selected fire in Explain."""
        row = self.selected()
        if row is not None:
            self.post_message(OpenExplain(row.id))

    # -- actions ---------------------------------------------------------------

    def action_jump_back(self) -> None:
        self._start()

    def selected(self) -> FireRow | None:
        table = self.query_one(FiresTable)
        if not self.window or not 0 <= table.cursor_row < len(self.window):
            return None
        return self.window[table.cursor_row]

    def action_copy(self) -> None:
        row = self.selected()
        if row is None:
            return
        self.app.copy_to_clipboard(json.dumps(row.to_json(), sort_keys=True))
        self.app.notify(f"fire {row.id} copied as JSON", timeout=3)

    def action_filter(self) -> None:
        box = self.query_one("#fires-filter", Field)
        box.remove_class("hidden")
        focus_now(box)

    def action_close_filter(self) -> None:
        box = self.query_one("#fires-filter", Field)
        box.add_class("hidden")
        focus_now(self.query_one(FiresTable))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc clears only when there is a filter (box open or applied); else it goes back."""
        if action == "clear_filter":
            box = self.query_one("#fires-filter", Field)
            return not self.flt.empty or not box.has_class("hidden")
        return True

    def action_clear_filter(self) -> None:
        """Esc: drop the filter (applied or being typed) and follow the whole tail again."""
        self.query_one("#fires-filter", Field).value = ""
        self.action_close_filter()
        if not self.flt.empty:
            self.flt = FireFilter()
            self._start()

    def set_filter_text(self, text: str) -> None:
        """Apply a filter given as text (also used by the Fleet pane)."""
        box = self.query_one("#fires-filter", Field)
        box.value = text
        self._apply(text)

    def show_range(self, harness: str | None, at_from: int, at_to: int) -> None:
        """Show the fires of ``harness`` in ``[at_from, at_to)`` (Enter on a Timeline cell)."""
        self.flt = FireFilter(harness=harness or None, at_from=at_from, at_to=at_to)
        # The box keeps only what it can parse; the status line shows the time range too.
        self.query_one("#fires-filter", Field).value = f"harness:{harness}" if harness else ""
        self._start()

    def _submit_filter(self, text: str) -> None:
        """Enter in the filter box: apply it and give the keys back to the table at once."""
        if self._apply(text):
            self.action_close_filter()

    def _apply(self, text: str) -> bool:
        try:
            self.flt = parse_filter(text)
        except HarnessError as exc:
            self.report(exc)
            return False
        self._start()
        return True
