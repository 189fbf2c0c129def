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
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Resize
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static

from console.context import ConsoleContext
from console.messages import ShowError, ShowPane
from console.panes.base import plural
from console.panes.fires import FiresPane
from console.widgets.timeline_grid import GLYPHS as GLYPHS
from console.widgets.timeline_grid import LEGEND, NAME_W, TimelineGrid, grid_lines, ruler
from engine.errors import HarnessError
from engine.views.changes import file_stamp
from engine.views.timeline import (
    ZOOMS,
    Timeline,
    build_timeline,
    format_bucket,
    format_tick,
    zoom_span,
)

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
            with self.context.session() as conn:
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
