"""The bounded, dropping queue in front of the committer.

Sources (observer, ledger, loop guard…) must never stall because the store is
slow or locked: a stalled observer would delay the very harness it watches.
So a writer calls :meth:`JournalWriter.offer`, which only appends to a bounded
in-memory queue and returns at once: ``True`` if the row was queued, ``False``
(and the drop counted) when the queue is full. Validation happens on the
committer thread, not in ``offer``, to keep the writer's cost to a lock and an
append. A source whose rows are valid when built (serve's OTLP mapper makes
every value of its journal shape and refuses a record that does not fit, so
it can tell its client which) offers a whole request at once with
:meth:`JournalWriter.offer_checked`: one lock for the batch, and no second
check on the committer thread, whose time is shared with the offering
threads under one interpreter lock. One committer thread drains the queue
in batches (one transaction each) and, while the writer is running, wakes at
least every ``tick_poll_s`` so tick rows are admitted even when nothing else
happens.

Counts: ``offered == queued + dropped`` exactly, and every queued row is
either admitted or refused by the time :meth:`close` returns. Drops and
refusals are persisted to the store's counters with the next batch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import engine.journal.schema  # noqa: F401  (hands the journal's tables to the store)
from engine.journal.rows import InsertRow
from engine.journal.writer import MINUTE_MS, Clock, Committer, wall_clock_ms
from engine.record import Record
from engine.store.db import connect

DEFAULT_CAPACITY = 10_000
DEFAULT_BATCH = 5_000
#: Rows checked between voluntary GIL releases on the committer thread. Checking
#: is Python code; without these releases an offering thread could wait a whole
#: interpreter switch interval (5 ms) for the GIL.
_CHECK_CHUNK = 128


class WriterStats(Record):
    __slots__ = ("admitted", "batches", "dropped", "offered", "refused", "ticks")
    __match_args__ = ("offered", "dropped", "admitted", "refused", "ticks", "batches")

    def __init__(
        self, offered: int, dropped: int, admitted: int, refused: int, ticks: int, batches: int
    ) -> None:
        self.offered: Final = offered
        self.dropped: Final = dropped
        self.admitted: Final = admitted
        self.refused: Final = refused
        self.ticks: Final = ticks
        self.batches: Final = batches


class _Checked:
    """Rows queued by :meth:`JournalWriter.offer_checked`, in order: admitted without a re-check."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[InsertRow]) -> None:
        self.rows = rows


class JournalWriter:
    """A committer thread behind a bounded queue. Use as a context manager or start/close."""

    def __init__(
        self,
        store: str | Path,
        *,
        capacity: int = DEFAULT_CAPACITY,
        batch: int = DEFAULT_BATCH,
        clock: Clock = wall_clock_ms,
        ticks: bool = True,
        tick_poll_s: float = 1.0,
    ) -> None:
        if capacity < 1 or batch < 1:
            raise ValueError("capacity and batch must be at least 1")
        self.store = Path(store)
        self.capacity = capacity
        self.batch = batch
        self.clock = clock
        self.ticks = ticks
        self.tick_poll_s = tick_poll_s
        #: Single offered rows and :class:`_Checked` runs, in admission order.
        self._queue: deque[object] = deque()
        self._size = 0  # rows queued (a _Checked run counts its rows)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closing = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.offered = 0
        self.dropped = 0
        self._dropped_unflushed = 0
        self.admitted = 0
        self.refused = 0
        self.tick_rows = 0
        self.batches = 0
        # Open (and migrate) in the caller's thread so a bad store fails loudly here.
        connect(self.store).close()

    def __enter__(self) -> JournalWriter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="journal-committer", daemon=True)
            self._thread.start()

    def offer(self, row: object) -> bool:
        """Queue ``row`` for admission; never blocks on the store. False = dropped (counted)."""
        with self._lock:
            self.offered += 1
            if self._size >= self.capacity or self._closing:
                self.dropped += 1
                self._dropped_unflushed += 1
                return False
            self._queue.append(row)
            self._size += 1
            if self._size == 1:
                self._wake.notify()
            return True

    def offer_checked(self, rows: Sequence[InsertRow]) -> int:
        """Queue already-checked insert tuples as one run; return how many were queued.

        Never blocks on the store. The rows keep their order; when the queue
        cannot take them all, the first ones that fit are queued and the whole
        remainder is dropped and counted, so a row is never split or half
        taken. The caller guarantees each row would pass
        :func:`~engine.journal.rows.check_values` and is not a tick: the
        committer admits them as they are.
        """
        n = len(rows)
        with self._lock:
            self.offered += n
            take = 0 if self._closing else max(0, min(n, self.capacity - self._size))
            if take:
                self._queue.append(_Checked(list(rows[:take])))
                if self._size == 0:
                    self._wake.notify()
                self._size += take
            dropped = n - take
            if dropped:
                self.dropped += dropped
                self._dropped_unflushed += dropped
            return take

    def close(self, timeout: float | None = 30.0) -> WriterStats:
        """Stop taking rows, admit everything queued, flush counters, stop the thread."""
        with self._lock:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise self._error
        return self.stats()

    def stats(self) -> WriterStats:
        with self._lock:
            return WriterStats(
                offered=self.offered,
                dropped=self.dropped,
                admitted=self.admitted,
                refused=self.refused,
                ticks=self.tick_rows,
                batches=self.batches,
            )

    @property
    def error(self) -> BaseException | None:
        """The exception that stopped the committer thread, if any."""
        return self._error

    def _take(self) -> tuple[list[object], int, bool]:
        """Wait for rows (or a tick deadline); return (items, drops to flush, closing).

        Items are single offered rows and :class:`_Checked` runs, at most
        ``batch`` rows in all.
        """
        with self._lock:
            if not self._queue and not self._closing:
                self._wake.wait(self.tick_poll_s)
            queue = self._queue
            items: list[object] = []
            n = 0
            while queue and n < self.batch:
                item = queue.popleft()
                if type(item) is _Checked:
                    room = self.batch - n
                    if len(item.rows) > room:  # split the run at the batch size, keep order
                        queue.appendleft(_Checked(item.rows[room:]))
                        item = _Checked(item.rows[:room])
                    n += len(item.rows)
                else:
                    n += 1
                items.append(item)
            self._size -= n
            drops, self._dropped_unflushed = self._dropped_unflushed, 0
            return items, drops, self._closing and not self._queue

    def _run(self) -> None:
        conn = connect(self.store, check_same_thread=True)
        committer = Committer(conn, clock=self.clock, ticks=self.ticks)
        last_minute = -1  # first pass: admit any ticks already due
        try:
            while True:
                items, drops, last = self._take()
                minute = self.clock() // MINUTE_MS
                if items or drops or (self.ticks and minute != last_minute):
                    good: list[InsertRow] = []
                    refused = 0
                    unchecked: list[object] = []
                    for item in items:
                        if type(item) is _Checked:
                            refused += _check(committer, unchecked, good)
                            unchecked = []
                            good.extend(item.rows)
                        else:
                            unchecked.append(item)
                    refused += _check(committer, unchecked, good)
                    result = committer.commit_checked(good, refused_count=refused, dropped=drops)
                    last_minute = minute
                    with self._lock:
                        self.admitted += result.admitted
                        self.refused += refused
                        self.tick_rows += result.ticks
                        self.batches += 1
                if last:
                    with self._lock:
                        leftover = self._dropped_unflushed
                        self._dropped_unflushed = 0
                    if leftover:
                        committer.admit([], dropped=leftover)
                    return
        except BaseException as exc:  # surfaced by close(); the thread must not die silently
            self._error = exc
        finally:
            conn.close()


def _check(committer: Committer, rows: list[object], good: list[InsertRow]) -> int:
    """Check offered ``rows`` into ``good`` (in order); return how many were refused."""
    refused = 0
    for k in range(0, len(rows), _CHECK_CHUNK):
        chunk_good, chunk_refused = committer.prepare(rows[k : k + _CHECK_CHUNK])
        good.extend(chunk_good)
        refused += len(chunk_refused)
        time.sleep(0)  # hand the GIL to offering threads now, not in 5 ms
    return refused
