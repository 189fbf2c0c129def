"""The Timeline's grid: harnesses down, time buckets across, a cell cursor.

A plain widget rendering one Rich Text per paint (lines drawn in the pane's
worker), not a DataTable: a DataTable with a column per bucket (up to ~150)
took over a second to lay out on each paint. Level glyphs take their words
from the rule vocabulary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from engine.views.timeline import LEVELS, Cell, Timeline, format_tick

NAME_W = 10
#: Each level's glyph and style, worst last (the level words come from the rule vocabulary).
GLYPHS = dict(
    zip(
        LEVELS,
        (("▫", "dim"), ("▪", "cyan"), ("■", "bold yellow"), ("█", "bold red")),
        strict=True,
    )
)
QUIET = ("∙", "dim")  # fired only in shadow or suppressed: nothing acted
HELD = ("━", "yellow")
LEGEND = (
    "▫ annotate  [cyan]▪ notify[/]  [b yellow]■ hold[/]  [b red]█ stop[/]  "
    "[dim]∙ shadow/suppressed only[/]  [yellow]━ held[/]"
)


def cell_glyph(cell: Cell | None, held: bool) -> tuple[str, str]:
    """One grid cell as (glyph, style): the worst level, else a hold span, else blank."""
    if cell is not None:
        return GLYPHS[cell.level] if cell.level else QUIET
    if held:
        return HELD
    return (" ", "")


def grid_lines(tl: Timeline) -> list[Text]:
    """One Rich line per harness (built in the worker thread, not on the UI thread)."""
    lines = []
    for h in tl.harnesses:
        line = Text((h or "(none)")[:NAME_W].ljust(NAME_W) + " │", no_wrap=True)
        for i in range(tl.buckets):
            glyph, style = cell_glyph(tl.cell(h, i), tl.held(h, i) is not None)
            line.append(glyph, style or None)
        lines.append(line)
    return lines


def ruler(tl: Timeline, width: int) -> str:
    """Tick labels above the grid, one every ``width`` columns from the left edge."""
    out = [" "] * (NAME_W + 2 + tl.buckets)
    for col in range(0, tl.buckets, width):
        label = "┆" + format_tick(tl.bucket_range(col)[0], tl.bucket_ms)
        at = NAME_W + 2 + col
        if at + len(label) <= len(out):
            out[at : at + len(label)] = list(label)
    return "".join(out).rstrip()


class TimelineGrid(Widget, can_focus=True):
    """The grid: one line per harness, a cell cursor, Enter selects.

    A plain widget rendering one Rich Text, not a DataTable: a DataTable with a
    column per bucket (up to ~150) took over a second to lay out on each paint.

    Keys: arrows move the cell cursor, ``home``/``end`` the first/last column,
    ``enter`` the Fires of that cell.

    Messages: :class:`Moved` (the cursor moved), :class:`Selected` (Enter).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(0, -1)", "Left", show=False),
        Binding("right", "move(0, 1)", "Right", show=False),
        Binding("up", "move(-1, 0)", "Up", show=False),
        Binding("down", "move(1, 0)", "Down", show=False),
        Binding("home", "edge(0)", "First column", show=False),
        Binding("end", "edge(1)", "Last column", show=False),
        Binding("enter", "select", "Fires", tooltip="of this harness in this cell's time"),
    ]
    DEFAULT_CSS = "TimelineGrid { height: 1fr; padding: 0 1; }"

    #: (row, column); column 0 is the harness name, 1.. the buckets.
    cursor: reactive[tuple[int, int]] = reactive((0, 0))

    class Moved(Message):
        """The cursor moved (the pane updates its status line)."""

    class Selected(Message):
        """Enter on the cursor's cell."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.timeline: Timeline | None = None
        self._lines: list[Text] = []
        #: Called with perf_counter() when a newly shown grid is rendered for a frame.
        self.on_paint: Callable[[float], None] | None = None
        self._fresh = False

    def show(self, tl: Timeline, lines: list[Text], keep_cursor: bool) -> None:
        self.timeline = tl
        self._lines = lines
        self._fresh = True
        row, col = self.cursor if keep_cursor else (0, tl.buckets)
        self.cursor = (min(row, max(0, len(tl.harnesses) - 1)), min(col, tl.buckets))
        self.refresh()

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="crop")
        if self._fresh and self.on_paint is not None:
            # the compositor writes the frame as soon as the visible widgets are
            # rendered: the moment the operator sees the new grid (or that it is empty)
            self._fresh = False
            self.on_paint(time.perf_counter())
        if self.timeline is None or not self._lines:
            return out
        crow, ccol = self.cursor
        style = "reverse" if self.has_focus else "underline"
        for r, line in enumerate(self._lines):
            if r == crow:
                line = line.copy()
                if ccol == 0:
                    line.stylize(style, 0, NAME_W)
                else:
                    at = NAME_W + 2 + ccol - 1
                    if not line.plain[at : at + 1].strip():
                        line = line[:at] + Text("▁" if not self.has_focus else " ") + line[at + 1 :]
                    line.stylize(style, at, at + 1)
            out.append_text(line)
            if r < len(self._lines) - 1:
                out.append("\n")
        return out

    def watch_cursor(self) -> None:
        self.refresh()
        self.post_message(self.Moved())

    def action_move(self, drow: int, dcol: int) -> None:
        tl = self.timeline
        if tl is None or not tl.harnesses:
            return
        row, col = self.cursor
        row = max(0, min(len(tl.harnesses) - 1, row + drow))
        col = max(0, min(tl.buckets, col + dcol))
        self.cursor = (row, col)

    def action_edge(self, end: int) -> None:
        if self.timeline is not None:
            self.cursor = (self.cursor[0], self.timeline.buckets if end else 0)

    def action_select(self) -> None:
        self.post_message(self.Selected())

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
