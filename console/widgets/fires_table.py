"""The Fires pane's table: a fitted table that tells the pane when the operator moves.

Kept apart from the pane, whose tail loop is long enough on its own.
"""

from __future__ import annotations

from textual.events import MouseScrollUp
from textual.message import Message

from console.widgets.table import FitTable


class FiresTable(FitTable):
    """A fitted table that tells its pane when the operator moves, and whether at an edge.

    Only operator actions post :class:`Moved`; the pane's own cursor moves
    (following the tail, re-rendering a page) do not, so paging never feeds
    back on itself.

    Keys: the DataTable's cursor keys; ``end`` jumps back to the live tail.

    Messages: :class:`Moved` (the operator moved up or down, and whether at an
    edge), :class:`JumpBack` (follow the tail again).
    """

    class Moved(Message):
        """The operator moved ``up`` or ``down``; ``edge`` when now at the first/last row."""

        def __init__(self, direction: str, edge: bool) -> None:
            super().__init__()
            self.direction = direction
            self.edge = edge

    class JumpBack(Message):
        """The operator asked to follow the tail again."""

    def _up(self) -> None:
        self.post_message(self.Moved("up", self.cursor_row <= 0))

    def _down(self) -> None:
        self.post_message(self.Moved("down", self.cursor_row >= self.row_count - 1))

    def action_cursor_up(self) -> None:
        super().action_cursor_up()
        self._up()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._up()

    def action_scroll_top(self) -> None:
        super().action_scroll_top()
        self._up()

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._up()

    def action_cursor_down(self) -> None:
        super().action_cursor_down()
        self._down()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._down()

    def action_scroll_end(self) -> None:
        """``end`` jumps back to the live tail (the pane re-follows)."""
        self.post_message(self.JumpBack())

    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        super()._on_mouse_scroll_up(event)
        self.post_message(self.Moved("up", self.scroll_y <= 0))
