"""What every pane shares: its context, one way to read the store, one way to report errors.

Before this, each pane's worker repeated the same connect / try / close /
catch-HarnessError / notify block; a pane now calls :meth:`StorePane.with_store`
(or :meth:`StorePane.report`) and the error reaches the app as one typed
:class:`~console.messages.ShowError`, so every pane's failures look alike.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from textual.containers import Vertical

from console.context import ConsoleContext
from console.messages import ShowError
from engine.errors import HarnessError

T = TypeVar("T")


class StorePane(Vertical):
    """A pane over the store: holds the context and turns engine errors into ShowError."""

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(classes="pane")
        self.context = context

    def report(self, exc: HarnessError) -> None:
        """Show ``exc`` (title and every located line) as an error notification; thread-safe."""
        self.post_message(ShowError(exc.title, str(exc)))

    def with_store(self, read: Callable[[sqlite3.Connection], T]) -> T | None:
        """Run ``read`` on a fresh connection (one per worker thread) and close it.

        ``None`` means it failed and the error has been shown; ``read`` itself
        should return something other than ``None`` when the caller must tell.
        """
        try:
            conn = self.context.connect()
            try:
                return read(conn)
            finally:
                conn.close()
        except HarnessError as exc:
            self.report(exc)
            return None
