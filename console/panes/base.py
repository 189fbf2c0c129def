"""What every pane shares: its context, one way to read the store, one way to report errors.

Before this, each pane's worker repeated the same connect / try / close /
catch-HarnessError / notify block; a pane now calls :meth:`StorePane.with_store`
(or :meth:`StorePane.report`) and the error reaches the app as one typed
:class:`~console.messages.ShowError`, so every pane's failures look alike.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from textual.containers import Vertical
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import NoActiveWorker, get_current_worker

from console.context import ConsoleContext
from console.messages import ShowError
from engine.errors import HarnessError
from engine.views.changes import file_stamp, store_version

T = TypeVar("T")

#: A timer tick reads the store at least this often even while its files stand
#: still (a write can land within the file system's timestamp granularity).
RECHECK_S = 30.0


def _cancelled() -> bool:
    try:
        return get_current_worker().is_cancelled
    except NoActiveWorker:
        return False


class StorePane(Vertical):
    """A pane over the store: holds the context and turns engine errors into ShowError."""

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(classes="pane")
        self.context = context
        #: The store version behind what is shown (see ``with_store_if_changed``).
        self._version: tuple[int, ...] | None = None
        #: A timer tick came while the pane was hidden: poll when it is shown.
        self._missed = False
        #: The store's files and :meth:`poll_key` at the last timer poll, and when it was.
        self._tick_key: tuple[int, ...] | None = None
        self._tick_at = 0.0
        #: Timer polls that got past the stat (each one starts a worker), for tests.
        self.polls = 0
        self._timer: Timer | None = None
        #: The timer is paused because the pane is hidden.
        self.asleep = False

    def poll_every(self, seconds: float) -> None:
        """Call :meth:`poll` every ``seconds`` while the pane is shown; once more when shown again.

        A hidden pane (another tab is active) reads nothing and its timer is
        paused (an idle console should cost nothing, not even wakeups); the
        pane catches up the moment it is shown.
        """
        self._timer = self.set_interval(seconds, self._tick)

    def poll(self) -> None:
        """A timer refresh (subclasses read the store if it changed)."""

    def poll_key(self) -> tuple[int, ...]:
        """What else, besides the store's files, moves what the pane shows (e.g. the minute)."""
        return ()

    def _shown(self) -> bool:
        node: object = self
        while isinstance(node, Widget):
            if not node.display:
                return False
            node = node.parent
        return True

    def _tick(self) -> None:
        if not self._shown():
            self._missed = True
            if self._timer is not None:
                self._timer.pause()  # until on_show
                self.asleep = True
        elif not any(w.node is self and not w.is_finished for w in self.app.workers):
            # a tick never cancels a read in flight: on a slow store that would starve the pane;
            # while the store's files stand still a tick costs a stat, not a worker and a connection
            key = file_stamp(self.context.store_path) + self.poll_key()
            now = time.monotonic()
            if key == self._tick_key and now - self._tick_at < RECHECK_S:
                return
            self._tick_key, self._tick_at = key, now
            self.polls += 1
            self.poll()

    def on_show(self) -> None:
        if self._timer is not None:
            self._timer.resume()
            self.asleep = False
        if self._missed:
            self._missed = False
            self.poll()

    def report(self, exc: HarnessError) -> None:
        """Show ``exc`` (title and every located line) as an error notification; thread-safe."""
        self.post_message(ShowError(exc.title, str(exc)))

    def with_store_if_changed(
        self,
        read: Callable[[sqlite3.Connection], T],
        *,
        extra: tuple[int, ...] = (),
        force: bool = False,
    ) -> T | None:
        """Like :meth:`with_store`, but ``None`` without reading when nothing it shows moved.

        A timer refresh on a static store then costs a handful of indexed
        lookups, not the pane's whole read (an idle console must not burn CPU).
        ``extra`` adds what else the view depends on (e.g. the minute, for ages).
        """

        def probe(conn: sqlite3.Connection) -> tuple[tuple[int, ...], T | None]:
            version = store_version(conn) + extra
            if not force and version == self._version:
                return version, None
            return version, read(conn)

        got = self.with_store(probe)
        if got is None or _cancelled():
            # a newer load replaced this one: keep the old version so that one reads
            return None
        version, result = got
        if result is not None:
            self._version = version
        return result

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
