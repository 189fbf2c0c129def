"""The console's one-line header: what it is open on, and who acts on that store.

Textual's Header centres one title and crops it silently at the screen's
edge; at 80 columns the store path pushed "who acts" off the line. This
header keeps who acts whole on the right and shortens the store path from
its left, marked with ``…`` (the file name is the part an operator reads).
It reads who acts itself (``engine.views.acting``, read-only) every two
seconds, after a stat says the store's files moved or while someone acts
(an actor killed without a word lets its lease lapse without a write).
"""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from engine.views.acting import acting_on
from engine.views.changes import file_stamp

#: Seconds between looks at who acts.
ACTING_EVERY_S = 2.0


def cut_left(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, its start replaced by ``…`` when it does not fit."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    out = text
    while out and cell_len(out) > width - 1:
        out = out[1:]
    return "…" + out


class ConsoleHeader(Widget):
    """``harness console · <store>`` on the left, ``<who acts>`` on the right, one line.

    Messages: :class:`Acting` (a worker read who acts).
    """

    DEFAULT_CSS = """
    ConsoleHeader { dock: top; height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    #: Where the console is open ("demo · /tmp/…/journal.db").
    where: reactive[str] = reactive("")
    #: Who acts on the store ("serve@host:41 acting, rules sha256:…", "nobody is acting").
    acting: reactive[str] = reactive("")

    class Acting(Message):
        """Who acts on the store, in the header's words."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    def __init__(self) -> None:
        super().__init__()
        self.store: Path | None = None
        self._stamp: tuple[int, ...] = ()

    def watch_store(self, store: Path, where: str) -> None:
        """Say ``where`` and keep saying who acts on ``store``."""
        self.store, self.where = store, where
        self._read()
        self.set_interval(ACTING_EVERY_S, self._poll)

    def _poll(self) -> None:
        if self.store is None:
            return
        stamp = file_stamp(self.store)
        if stamp == self._stamp and self.acting.startswith("nobody"):
            return
        self._stamp = stamp
        self._read()

    @work(thread=True, exclusive=True, group="acting")
    def _read(self) -> None:
        acting = acting_on(self.store) if self.store is not None else None
        self.post_message(self.Acting(acting.line() if acting else "who acts: store not readable"))

    def on_console_header_acting(self, message: Acting) -> None:
        self.acting = message.line

    def render(self) -> Text:
        width = max(0, self.size.width)
        right = self.acting
        left_room = width - cell_len(right) - 3
        left = "harness console · " + self.where
        if left_room < len("harness console"):
            left = cut_left(self.where, max(0, left_room))
        else:
            left = cut_left(left, left_room)
        gap = max(1, width - cell_len(left) - cell_len(right))
        line = Text(no_wrap=True, overflow="crop")
        line.append(left, "bold")
        line.append(" " * gap)
        line.append(right, "reverse" if right.startswith("nobody") else "bold")
        return line
