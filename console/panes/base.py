"""What every pane shares: its context, one way to read the store, refresh, errors and help.

Before this each pane's worker repeated the same connect / try / close /
catch-HarnessError / notify block, and each pane that lists something from
the store repeated the same mount / timer / refresh / worker / message code.
A listing pane now says only what it reads (:meth:`StorePane.read`, run in a
thread worker on its own connection) and how it shows it
(:meth:`StorePane.show`, on the UI thread); the base class refreshes it on
mount, on ``r`` and on a timer while it is shown, skips reads while the
store's files stand still, and turns engine errors into one typed
:class:`~console.messages.ShowError`.
"""

from __future__ import annotations

import inspect
import sqlite3
import time
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar, cast

from textual import work
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import NoActiveWorker, get_current_worker

from console.context import ConsoleContext
from console.messages import ShowError
from engine.errors import HarnessError
from engine.views.changes import file_stamp, store_version

T = TypeVar("T")
R = TypeVar("R")

#: A timer tick reads the store at least this often even while its files stand
#: still (a write can land within the file system's timestamp granularity).
RECHECK_S = 30.0


def _cancelled() -> bool:
    try:
        return get_current_worker().is_cancelled
    except NoActiveWorker:
        return False


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 hold``, ``2 holds``, ``1,204 fires``: a count with the word that agrees with it."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def about(cls: type[Widget]) -> str:
    """The first paragraph of a pane's class docstring: what it shows (for F1)."""
    doc = inspect.getdoc(cls) or ""
    return doc.split("\n\n", 1)[0].replace("\n", " ")


class StorePane(Vertical, Generic[T]):
    """A pane over the store: its context, refresh of what it lists, and errors as ShowError.

    Keys: ``r`` refreshes now (panes that list from the store).

    Messages: :class:`StorePane.Read` carries a worker's read to :meth:`show`;
    errors reach the app as :class:`~console.messages.ShowError`.
    """

    #: Seconds between timer refreshes while shown: None reads nothing by itself;
    #: otherwise at least the context's ``refresh_interval``.
    REFRESH_S: ClassVar[float | None] = None

    class Read(Message):
        """A worker read the pane's listing; the pane shows ``result``."""

        def __init__(self, result: object) -> None:
            super().__init__()
            self.result = result

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

    # -- listing panes: read in a worker, show on the UI thread -----------------

    def on_mount(self) -> None:
        if self.REFRESH_S is None:
            return
        self.action_refresh()
        if self.context.live:
            self.poll_every(max(self.context.refresh_interval, self.REFRESH_S))

    def read(self, conn: sqlite3.Connection) -> T:
        """What the pane lists, read on a worker thread (listing panes override this)."""
        raise NotImplementedError

    def show(self, result: T) -> None:
        """Put ``result`` on screen (UI thread; listing panes override this)."""

    def force_read(self) -> bool:
        """Whether the next timer refresh must read even if the store did not move."""
        return False

    def poll(self) -> None:
        """A timer refresh: read if anything shown could have moved."""
        self.load()

    def action_refresh(self) -> None:
        """``r``: read now."""
        self.load(force=True)

    @work(thread=True, exclusive=True, group="pane-read")
    def load(self, force: bool = False) -> None:
        result = self.with_store_if_changed(
            self.read, extra=self.poll_key(), force=force or self.force_read()
        )
        if result is not None:
            self.post_message(self.Read(result))

    def on_store_pane_read(self, message: Read) -> None:
        message.stop()
        self.show(cast(T, message.result))

    # -- the timer ---------------------------------------------------------------

    def poll_every(self, seconds: float) -> None:
        """Call :meth:`poll` every ``seconds`` while the pane is shown; once more when shown again.

        A hidden pane (another tab is active) reads nothing and its timer is
        paused (an idle console should cost nothing, not even wakeups); the
        pane catches up the moment it is shown.
        """
        self._timer = self.set_interval(seconds, self._tick)

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

    # -- reading the store and reporting -------------------------------------------

    def report(self, exc: HarnessError) -> None:
        """Show ``exc`` (title and every located line) as an error notification; thread-safe."""
        self.post_message(ShowError(exc.title, str(exc)))

    def with_store_if_changed(
        self,
        read: Callable[[sqlite3.Connection], R],
        *,
        extra: tuple[int, ...] = (),
        force: bool = False,
    ) -> R | None:
        """Like :meth:`with_store`, but ``None`` without reading when nothing it shows moved.

        A timer refresh on a static store then costs a handful of indexed
        lookups, not the pane's whole read (an idle console must not burn CPU).
        ``extra`` adds what else the view depends on (e.g. the minute, for ages).
        """

        def probe(conn: sqlite3.Connection) -> tuple[tuple[int, ...], R | None]:
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

    def with_store(self, read: Callable[[sqlite3.Connection], R]) -> R | None:
        """Run ``read`` on a fresh connection (one per worker thread) and close it.

        ``None`` means it failed and the error has been shown; ``read`` itself
        should return something other than ``None`` when the caller must tell.
        """
        try:
            with self.context.session() as conn:
                return read(conn)
        except HarnessError as exc:  # a store error included (see ConsoleContext.session)
            self.report(exc)
            return None
