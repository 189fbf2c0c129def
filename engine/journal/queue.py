"""The queue in front of the committer: bounded, and honest about what is stored.

Two kinds of source write rows, and they need different promises:

- A source that must never stall (the simulator, a live feed) calls
  :meth:`JournalWriter.offer`, which only appends to a bounded in-memory
  queue and returns at once: ``True`` if the row was queued, ``False`` (and
  the drop counted) when the queue is full.
- A source that answers a client (``harness serve``: a hook or an OTLP
  request) calls :meth:`JournalWriter.submit` with rows it already checked and
  gets a :class:`Ticket`; :meth:`JournalWriter.acknowledge` returns only once
  those rows are committed (group commit: every ticket waiting when a batch
  starts commits in that one transaction), so a 2xx really means stored. A
  ticket that cannot be committed in time is withdrawn whole, so a client
  told "not stored" (503) finds nothing of its request stored when it retries.

One committer thread drains the queue in batches (one transaction each) and,
while the writer runs, wakes at least every ``tick_poll_s`` so tick rows are
admitted even when nothing else happens. A batch that fails to commit (the
store locked, the disk full, an I/O error, a read-only remount) is put back
at the head of the queue in its order and retried with backoff on a fresh
connection; :attr:`JournalWriter.failure` says why meanwhile, and the writer
resumes by itself when the cause goes. That fresh connection never creates
the store: a store missing while its disk is away is a failure to retry, not
a new empty file to acknowledge rows into. :attr:`JournalWriter.reopened`
counts those fresh connections, so a reader that opened the store before one
knows to open it again: after a disk comes back, an old connection can go on
reading the old file's cached pages without an error. For the same reason
each commit checks, before its tickets are acknowledged, that the store's
path still names the file it was written to: SQLite in WAL mode commits into
a file that was removed or replaced (a backup restored over it) without a
word, and rows acknowledged there would be lost. Such a batch is retried on
the file now at the path, and fails (503) while there is none. Only a store
that is no store any more (corrupt) stops the writer:
:attr:`JournalWriter.error` is then set and the owner should exit so a
supervisor restarts it.

Counts: ``offered == queued + dropped`` exactly, and every queued row is in
the end admitted, refused or withdrawn (a ticket answered "not stored").
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import engine.journal.schema  # noqa: F401  (hands the journal's tables to the store)
from engine.errors import InputError
from engine.journal.errors import StoreUnavailable
from engine.journal.rows import InsertRow
from engine.journal.store_faults import StoreMoved, fault_reason, file_id, store_error_is_fatal
from engine.journal.writer import MINUTE_MS, Clock, Committer, wall_clock_ms
from engine.record import Record
from engine.store.db import connect, set_busy_timeout
from engine.store.txn import rollback

DEFAULT_CAPACITY = 10_000
DEFAULT_BATCH = 5_000
#: How long one commit attempt waits for another writer's lock before it is
#: counted as a failure (and its tickets may be withdrawn).
ATTEMPT_BUSY_MS = 1_000
#: Retry backoff after a failed commit, seconds: doubles from the first to the last.
BACKOFF_S = (0.05, 1.0)
#: Rows checked between voluntary GIL releases on the committer thread. Checking
#: is Python code; without these releases an offering thread could wait a whole
#: interpreter switch interval (5 ms) for the GIL.
_CHECK_CHUNK = 128


class WriterStats(Record):
    """The writer's counts at one moment (for serve's exit line, metrics and tests)."""

    __slots__ = (
        "admitted",
        "batches",
        "dropped",
        "failures",
        "offered",
        "refused",
        "ticks",
        "withdrawn",
    )
    __match_args__ = (
        "offered",
        "dropped",
        "admitted",
        "refused",
        "ticks",
        "batches",
        "failures",
        "withdrawn",
    )

    def __init__(
        self,
        offered: int,
        dropped: int,
        admitted: int,
        refused: int,
        ticks: int,
        batches: int,
        failures: int = 0,
        withdrawn: int = 0,
    ) -> None:
        self.offered: Final = offered
        self.dropped: Final = dropped
        self.admitted: Final = admitted
        self.refused: Final = refused
        self.ticks: Final = ticks
        self.batches: Final = batches
        self.failures: Final = failures
        self.withdrawn: Final = withdrawn


class _Checked:
    """Rows queued by :meth:`JournalWriter.offer_checked`, in order: admitted without a re-check."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[InsertRow]) -> None:
        self.rows = rows


_QUEUED, _TAKEN, _DONE, _WITHDRAWN = range(4)


class Ticket:
    """One client request's checked rows: committed together, acknowledged after the commit.

    Mutable on purpose (the committer moves it from queued to taken to done);
    only the writer changes it, under its lock.
    """

    __slots__ = ("done", "error", "expired", "first_seq", "last_seq", "rows", "state")

    def __init__(self, rows: list[InsertRow]) -> None:
        self.rows = rows
        self.state = _QUEUED
        self.first_seq = 0
        self.last_seq = 0
        self.error: str | None = None
        #: Its client stopped waiting mid-attempt: a failed attempt withdraws it, not retries it.
        self.expired = False
        self.done = threading.Event()


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
        #: Single offered rows, :class:`_Checked` runs and tickets, in admission order.
        self._queue: deque[object] = deque()
        self._size = 0  # rows queued (a run or ticket counts its rows)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closing = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._failure: str | None = None
        self.offered = 0
        self.dropped = 0
        self._dropped_unflushed = 0
        self.admitted = 0
        self.refused = 0
        self.tick_rows = 0
        self.batches = 0
        self.failures = 0
        self.withdrawn = 0
        #: Connections the committer opened after a failure (see the module docstring).
        self.reopened = 0
        self._opened = False
        #: (device, inode) of the file the committer's connection has open.
        self._file: tuple[int, int] | None = None
        #: Called on the committer thread after each commit with the last seq stored.
        self.on_commit: list[Callable[[int], None]] = []
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

    # -- sources that must not stall ------------------------------------------

    def offer(self, row: object) -> bool:
        """Queue ``row`` for admission; never blocks on the store. False = dropped (counted)."""
        with self._lock:
            self.offered += 1
            if self._size >= self.capacity or self._closing:
                self.dropped += 1
                self._dropped_unflushed += 1
                return False
            self._append(row, 1)
            return True

    def offer_checked(self, rows: Sequence[InsertRow]) -> int:
        """Queue already-checked insert tuples as one run; return how many were queued.

        Never blocks on the store. The rows keep their order; when the queue
        cannot take them all, the first ones that fit are queued and the whole
        remainder is dropped and counted, so a row is never split or half
        taken. The caller guarantees each row would pass
        :func:`~engine.journal.rows.check_values` and is not a tick.
        """
        n = len(rows)
        with self._lock:
            self.offered += n
            take = 0 if self._closing else max(0, min(n, self.capacity - self._size))
            if take:
                self._append(_Checked(list(rows[:take])), take)
            dropped = n - take
            if dropped:
                self.dropped += dropped
                self._dropped_unflushed += dropped
            return take

    # -- sources that acknowledge ---------------------------------------------

    def submit(self, rows: Sequence[InsertRow]) -> Ticket:
        """Queue checked rows to be committed together; StoreUnavailable when they cannot be.

        Refused at once (nothing queued) when the writer is closing or stopped,
        or when the queue is full: a client that must know its rows are stored
        is better told now than after a wait.
        """
        ticket = Ticket(list(rows))
        with self._lock:
            if self._error is not None:
                raise StoreUnavailable(f"journal writer stopped: {fault_reason(self._error)}")
            if self._closing:
                raise StoreUnavailable("serve is shutting down")
            if self._size + len(ticket.rows) > self.capacity:
                raise StoreUnavailable(
                    f"admission queue full ({self.capacity} rows waiting"
                    + (f"; {self._failure}" if self._failure else "")
                    + ")"
                )
            self.offered += len(ticket.rows)
            self._append(ticket, len(ticket.rows))
        return ticket

    def acknowledge(self, ticket: Ticket, timeout: float) -> int:
        """Wait until ``ticket`` is committed; return its last seq (0 for no rows).

        When it is not committed within ``timeout`` seconds and still waits in
        the queue it is withdrawn (never stored) and StoreUnavailable names
        why; when the committer is mid-attempt with it, that attempt's outcome
        decides (one attempt is bounded by its busy timeout): committed, it is
        acknowledged; failed, it is withdrawn instead of being retried.
        """
        if not ticket.rows:
            return 0
        if not ticket.done.wait(timeout):
            with self._lock:
                if ticket.state == _QUEUED:
                    self._queue.remove(ticket)
                    self._size -= len(ticket.rows)
                    self._withdraw(ticket, self._failure or f"not committed within {timeout:g}s")
                else:
                    ticket.expired = True
            ticket.done.wait()
        if ticket.error is not None:
            raise StoreUnavailable(f"rows not stored: {ticket.error}")
        return ticket.last_seq

    # -- state ------------------------------------------------------------------

    def close(self, timeout: float | None = 30.0) -> WriterStats:
        """Stop taking rows, commit everything queued (within ``timeout``), stop the thread.

        Tickets still queued when the time is up are answered "not stored".
        """
        with self._lock:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        self._fail_queued("serve stopped before these rows could be stored")
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
                failures=self.failures,
                withdrawn=self.withdrawn,
            )

    @property
    def error(self) -> BaseException | None:
        """The exception that stopped the committer thread for good, if any."""
        return self._error

    @property
    def failure(self) -> str | None:
        """Why the last commit attempt failed, while the writer retries (None when it works)."""
        return self._failure

    @property
    def queued(self) -> int:
        with self._lock:
            return self._size

    # -- the committer thread -------------------------------------------------

    def _append(self, item: object, n: int) -> None:
        """Append under the lock and wake the committer when the queue was empty."""
        self._queue.append(item)
        if self._size == 0:
            self._wake.notify()
        self._size += n

    def _take(self) -> tuple[list[object], int, bool]:
        """Wait for rows (or a tick deadline); return (items, drops to flush, closing).

        Items are single offered rows, :class:`_Checked` runs and tickets, at
        most ``batch`` rows in all. A run may be split at the batch size (its
        order kept); a ticket never is: it commits whole or not at all.
        """
        with self._lock:
            if not self._queue and not self._closing:
                self._wake.wait(self.tick_poll_s)
            queue = self._queue
            items: list[object] = []
            n = 0
            while queue and n < self.batch:
                head = queue[0]
                if isinstance(head, Ticket):
                    if items and n + len(head.rows) > self.batch:
                        break
                    head.state = _TAKEN
                    n += len(head.rows)
                elif isinstance(head, _Checked):
                    room = self.batch - n
                    if len(head.rows) > room:
                        queue[0] = _Checked(head.rows[room:])
                        queue.appendleft(_Checked(head.rows[:room]))
                    n += len(queue[0].rows)  # type: ignore[attr-defined]
                else:
                    n += 1
                items.append(queue.popleft())
            self._size -= n
            drops, self._dropped_unflushed = self._dropped_unflushed, 0
            return items, drops, self._closing and not self._queue

    def _withdraw(self, ticket: Ticket, why: str) -> None:
        """Answer ``ticket``, no longer queued, "not stored" (under the lock)."""
        ticket.state = _WITHDRAWN
        ticket.error = why
        self.withdrawn += len(ticket.rows)
        ticket.done.set()

    def _put_back(self, items: list[object], drops: int) -> None:
        """A failed batch goes back to the head of the queue, in its order.

        A ticket whose client stopped waiting during the attempt is withdrawn
        instead: its client is told "not stored", so it must never be stored.
        """
        with self._lock:
            for item in reversed(items):
                if isinstance(item, Ticket):
                    if item.expired:
                        self._withdraw(item, self._failure or "not committed in time")
                        continue
                    item.state = _QUEUED
                    self._size += len(item.rows)
                elif isinstance(item, _Checked):
                    self._size += len(item.rows)
                else:
                    self._size += 1
                self._queue.appendleft(item)
            self._dropped_unflushed += drops

    def _run(self) -> None:
        committer: Committer | None = None
        last_minute = -1  # first pass: admit any ticks already due
        pause = BACKOFF_S[0]
        try:
            while True:
                items, drops, last = self._take()
                minute = self.clock() // MINUTE_MS
                if items or drops or (self.ticks and minute != last_minute):
                    fresh = committer is None
                    try:
                        committer = committer or self._open()
                        self._commit(committer, items, drops)
                    except (sqlite3.Error, OSError) as exc:
                        # A connection that met an I/O error may call the store
                        # malformed; only a fresh connection's word is believed.
                        if fresh and store_error_is_fatal(exc):
                            self._put_back(items, drops)  # then answered "not stored"
                            raise
                        self._failed(committer, items, drops, exc)
                        committer = None
                        time.sleep(pause)  # close() bounds a drain that keeps failing
                        pause = min(pause * 2, BACKOFF_S[1])
                        continue
                    pause = BACKOFF_S[0]
                    last_minute = minute
                if last:
                    self._flush_drops(committer)
                    return
        except BaseException as exc:  # the thread must not die silently
            with self._lock:
                self._error = exc
            self._fail_queued(f"journal writer stopped: {fault_reason(exc)}")
        finally:
            if committer is not None:
                committer.conn.close()

    def _open(self) -> Committer:
        try:
            conn = connect(self.store, create=False, check_same_thread=True)
        except InputError as exc:  # the store cannot be opened now: SQLite's error, or the OS's
            cause = exc.__context__
            raise cause if isinstance(cause, sqlite3.Error) else OSError(str(exc)) from None
        set_busy_timeout(conn, ATTEMPT_BUSY_MS)
        self._file = file_id(self.store)
        if self._file is None:  # gone again between the open and now
            conn.close()
            raise StoreMoved("the store file was removed while serve opened it")
        if self._opened:
            with self._lock:
                self.reopened += 1
        self._opened = True
        return Committer(conn, clock=self.clock, ticks=self.ticks)

    def _commit(self, committer: Committer, items: list[object], drops: int) -> None:
        """Commit one batch and settle its tickets (seq ranges in batch order)."""
        good: list[InsertRow] = []
        refused = 0
        unchecked: list[object] = []
        tickets: list[tuple[Ticket, int]] = []
        for item in items:
            if isinstance(item, _Checked | Ticket):
                refused += _check(committer, unchecked, good)
                unchecked = []
                if isinstance(item, Ticket):
                    tickets.append((item, len(good)))
                good.extend(item.rows)
            else:
                unchecked.append(item)
        refused += _check(committer, unchecked, good)
        result = committer.commit_checked(good, refused_count=refused, dropped=drops)
        if file_id(self.store) != self._file:
            raise StoreMoved("the store file was removed or replaced while serve wrote to it")
        with self._lock:
            self.admitted += result.admitted
            self.refused += refused
            self.tick_rows += result.ticks
            self.batches += 1
            self._failure = None
            for ticket, offset in tickets:
                ticket.first_seq = result.first_seq + offset
                ticket.last_seq = ticket.first_seq + len(ticket.rows) - 1
                ticket.state = _DONE
                ticket.done.set()
        if result.last_seq:
            for hook in self.on_commit:
                hook(result.last_seq)

    def _failed(
        self, committer: Committer | None, items: list[object], drops: int, exc: BaseException
    ) -> None:
        """Count the failure, keep the batch for the next attempt, drop the connection."""
        with self._lock:
            self.failures += 1
            self._failure = f"cannot write the store: {fault_reason(exc)}"
        self._put_back(items, drops)
        if committer is not None:
            with contextlib.suppress(sqlite3.Error):
                rollback(committer.conn)
            with contextlib.suppress(sqlite3.Error):
                committer.conn.close()

    def _flush_drops(self, committer: Committer | None) -> None:
        with self._lock:
            leftover = self._dropped_unflushed
            self._dropped_unflushed = 0
        if leftover and committer is not None:
            committer.admit([], dropped=leftover)

    def _fail_queued(self, why: str) -> None:
        """Answer every ticket still queued "not stored" (closing, or the writer stopped)."""
        with self._lock:
            kept: deque[object] = deque()
            for item in self._queue:
                if isinstance(item, Ticket):
                    self._size -= len(item.rows)
                    self._withdraw(item, why)
                else:
                    kept.append(item)
            self._queue = kept


def _check(committer: Committer, rows: list[object], good: list[InsertRow]) -> int:
    """Check offered ``rows`` into ``good`` (in order); return how many were refused."""
    refused = 0
    for k in range(0, len(rows), _CHECK_CHUNK):
        chunk_good, chunk_refused = committer.prepare(rows[k : k + _CHECK_CHUNK])
        good.extend(chunk_good)
        refused += len(chunk_refused)
        time.sleep(0)  # hand the GIL to offering threads now, not in 5 ms
    return refused
