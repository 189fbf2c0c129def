"""The console's one-line header: what it is open on, and who acts on that store.

Textual's Header centres one title and crops it silently at the screen's
edge; at 80 columns the store path pushed "who acts" off the line. This
header keeps who acts whole on the right and shortens the store path from
its left, marked with ``…`` (the file name is the part an operator reads).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


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
    """``harness console · <store>`` on the left, ``<who acts>`` on the right, one line."""

    DEFAULT_CSS = """
    ConsoleHeader { dock: top; height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    #: Where the console is open ("demo · /tmp/…/journal.db").
    where: reactive[str] = reactive("")
    #: Who acts on the store ("serve@host:41 acting, rules sha256:…", "nobody is acting").
    acting: reactive[str] = reactive("")

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
