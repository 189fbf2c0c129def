"""Timeline pane: harnesses down, time buckets across, each cell the worst level fired there.

The grid comes from ``engine.views.timeline`` (one grouped query per paint, run
in a thread worker), so zooming out to 7 days on a 45-day journal costs what
zooming in does. Holds are drawn as spans on their harness's row. Enter on a
cell opens Fires filtered to that harness and that bucket's time range (on the
name column: the whole visible span). While live, a cheap signature query
every few seconds decides whether anything changed before repainting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Resize
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from console.context import ConsoleContext
from console.messages import ShowError, ShowPane
from console.panes.base import plural
from console.panes.fires import FiresPane
from engine.errors import HarnessError
from engine.views.changes import file_stamp
from engine.views.timeline import (
    LEVELS,
    ZOOMS,
    Cell,
    Timeline,
    build_timeline,
    format_bucket,
    format_tick,
    zoom_span,
)

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


#: The footer shows zoom and pan keys as two groups.
ZOOM = Binding.Group("Zoom", compact=True)
PAN = Binding.Group("Pan", compact=True)


class TimelinePane(Vertical):
    """Harnesses down, time across: each cell the worst level that fired there, holds as spans.

    A dot marks a cell whose fires were only shadow or suppressed (nothing
    acted). Time is journal time: the right edge is the newest row. While
    live, a cheap signature query decides whether anything changed before a
    repaint.

    Keys: ``+`` (or ``=``)/``-`` zoom in/out (1h, 6h, 24h, 7d), ``[``/``]`` pan earlier
    and later, ``n`` now, ``enter`` on a cell the Fires of that harness and
    time (on the name column: the whole span), ``r`` refresh.

    Messages: :class:`Loaded` (a grid was read); posts
    :class:`~console.messages.ShowPane`; listens to :class:`TimelineGrid.Moved`
    and :class:`TimelineGrid.Selected`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", group=ZOOM),
        Binding("minus", "zoom(1)", "Zoom out", group=ZOOM),
        Binding("left_square_bracket", "pan(-1)", "Earlier", group=PAN),
        Binding("right_square_bracket", "pan(1)", "Later", group=PAN),
        Binding("n", "now", "Now", show=False, tooltip="back to the newest row"),
        Binding("r", "refresh", "Refresh", show=False),
    ]
    DEFAULT_CSS = """
    TimelinePane #timeline-ruler { height: 1; padding: 0 1; color: $text-muted; }
    TimelinePane #timeline-legend { height: auto; padding: 0 1; }
    """

    class Loaded(Message):
        """A grid was read (with its lines drawn in the worker) and its change signature."""

        def __init__(
            self, timeline: Timeline, lines: list[Text], signature: tuple[int, ...]
        ) -> None:
            super().__init__()
            self.timeline = timeline
            self.lines = lines
            self.signature = signature

    def __init__(self, context: ConsoleContext, zoom: str = "24h") -> None:
        super().__init__(classes="pane")
        self.context = context
        self.zoom = zoom
        #: Right edge in journal time when panned back; None follows the newest row.
        self.end_ms: int | None = None
        self.timeline: Timeline | None = None
        self.signature: tuple[int, ...] = ()
        #: perf_counter() when the grid was last painted, and how long that paint took.
        self.painted_at = 0.0
        self.paint_ms = 0.0
        self._asked = 0.0
        #: The store's files at the last timer poll.
        self._stamp: tuple[int, ...] = ()
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("loading the timeline …", id="timeline-status", classes="status-line")
        yield Static("", id="timeline-ruler")
        yield TimelineGrid(id="timeline-grid")
        yield Static(LEGEND, id="timeline-legend")

    def on_mount(self) -> None:
        if self.context.live:
            self._timer = self.set_interval(max(self.context.refresh_interval, 2.0), self._poll)

    def prepare(self) -> None:
        """The pane is about to be shown: start the first load now, not at on_show.

        The tab switch's layout and first frame take longer than the grouped
        query, so a load started before them has its grid ready for that frame
        instead of arriving a frame or two (and a footer rebuild) later.
        """
        if self.timeline is None and not self._asked:
            self.action_refresh()

    def on_show(self) -> None:
        """Load when first shown (a hidden pane costs nothing at startup), then on each show."""
        if self._timer is not None:
            self._timer.resume()
        if self.timeline is None:
            if not self._asked:  # else prepare() started the first load already
                self.action_refresh()
        else:
            self._poll()

    def on_resize(self, event: Resize) -> None:
        if self.timeline is not None and self._columns() != self.timeline.buckets:
            self.action_refresh()

    def _columns(self) -> int:
        width = self.size.width or self.app.size.width
        return max(12, width - NAME_W - 2 - 4)

    # -- loading -------------------------------------------------------------

    def action_refresh(self) -> None:
        self._asked = time.perf_counter()
        self._load(self.zoom, self._columns(), self.end_ms, ())

    def _poll(self) -> None:
        if not self.is_on_screen:
            if self._timer is not None:
                self._timer.pause()  # a hidden pane does not wake the console; on_show resumes
            return
        if self.timeline is not None and self.end_ms is None:
            # a stat first: no worker, connection or query while the store stands still
            stamp = file_stamp(self.context.store_path)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            self._load(self.zoom, self._columns(), None, self.signature)

    @work(thread=True, exclusive=True, group="timeline")
    def _load(self, zoom: str, columns: int, end_ms: int | None, seen: tuple[int, ...]) -> None:
        try:
            conn = self.context.connect()
            try:
                signature = tuple(
                    int(v or 0)
                    for v in conn.execute(
                        "SELECT (SELECT MAX(id) FROM rule_fires), (SELECT MAX(id) FROM rule_holds),"
                        " (SELECT COUNT(released_at) FROM rule_holds),"
                        " (SELECT MAX(seq) FROM rule_journal)"
                    ).fetchone()
                )
                if seen and signature[:3] == seen[:3] and signature[3] == seen[3]:
                    return
                timeline = build_timeline(conn, zoom=zoom, columns=columns, end_ms=end_ms)
            finally:
                conn.close()
        except HarnessError as exc:
            self.post_message(ShowError(exc.title, str(exc)))
            return
        self.post_message(self.Loaded(timeline, grid_lines(timeline), signature))

    def on_timeline_pane_loaded(self, message: Loaded) -> None:
        tl = message.timeline
        self.signature = message.signature
        old = self.timeline
        same_shape = old is not None and (old.harnesses, old.buckets) == (tl.harnesses, tl.buckets)
        self.timeline = tl
        grid = self.query_one(TimelineGrid)
        grid.on_paint = self._painted
        grid.show(tl, message.lines, keep_cursor=same_shape)
        self.query_one("#timeline-ruler", Static).update(ruler(tl, 12))
        self._status()

    def _painted(self, at: float) -> None:
        """The grid was rendered into a frame (what the operator sees).

        Measured there, not in an after-refresh callback: those run in order
        after the frame, and the footer's rebuild after a pane switch
        (queued first) delayed the callback, not the frame.
        """
        self.painted_at = at
        if self._asked:
            self.paint_ms = (self.painted_at - self._asked) * 1000
            self._asked = 0.0

    def _status(self) -> None:
        tl = self.timeline
        if tl is None:
            return
        where = "now" if self.end_ms is None else "panned back (n: now)"
        same_day = _when(tl.start_ms)[:5] == _when(tl.end_ms)[:5]
        span = (
            f"{_when(tl.start_ms)} → {format_tick(tl.end_ms, 0) if same_day else _when(tl.end_ms)}"
        )
        text = (
            f"zoom {tl.zoom} · {format_bucket(tl.bucket_ms)}/col · {span} UTC · {where}"
            f" · {plural(tl.fires, 'fire')} · {plural(len(tl.holds), 'hold')}"
        )
        cell = self.selected()
        if cell is not None:
            harness, lo, hi = cell
            text += f" · cursor [b]{harness or '(none)'}[/] {_when(lo)}–{format_tick(hi, 0)}"
        self.query_one("#timeline-status", Static).update(text)

    # -- navigation ------------------------------------------------------------

    def selected(self) -> tuple[str, int, int] | None:
        """(harness, start, end) of the cell under the cursor (the name column: whole span)."""
        tl = self.timeline
        if tl is None or not tl.harnesses:
            return None
        row, col = self.query_one(TimelineGrid).cursor
        if not 0 <= row < len(tl.harnesses):
            return None
        if col <= 0:
            return tl.harnesses[row], tl.start_ms, tl.end_ms
        lo, hi = tl.bucket_range(min(col - 1, tl.buckets - 1))
        return tl.harnesses[row], lo, hi

    def on_timeline_grid_moved(self, event: TimelineGrid.Moved) -> None:
        self._status()

    def on_timeline_grid_selected(self, event: TimelineGrid.Selected) -> None:
        event.stop()
        cell = self.selected()
        if cell is None:
            return
        harness, lo, hi = cell
        self.app.query_one(FiresPane).show_range(harness or None, lo, hi)
        self.post_message(ShowPane("fires"))

    def action_zoom(self, step: int) -> None:
        names = [n for n, _ in ZOOMS]
        index = max(0, min(len(names) - 1, names.index(self.zoom) + step))
        if names[index] != self.zoom:
            self.zoom = names[index]
            self.action_refresh()

    def action_pan(self, step: int) -> None:
        tl = self.timeline
        if tl is None:
            return
        shift = zoom_span(self.zoom) // 2 * step
        edge = (self.end_ms if self.end_ms is not None else tl.journal_end_ms) + shift
        self.end_ms = None if edge >= tl.journal_end_ms else edge
        self.action_refresh()

    def action_now(self) -> None:
        self.end_ms = None
        self.action_refresh()


def _when(ms: int) -> str:
    return f"{format_tick(ms, 86_400_000)} {format_tick(ms, 0)}"
