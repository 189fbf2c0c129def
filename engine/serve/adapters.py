"""Serve's plugs into the use cases' ports (:mod:`.ports`), on its writer and its readers.

- :class:`WriterJournal` hands each request's rows to the
  :class:`~engine.journal.queue.JournalWriter` as one ticket and returns only
  after the group commit that stored them, remembering each harness's newest
  seq (the gate's read-your-writes target).
- :class:`WatermarkGate` waits until the evaluator's :class:`Watermark`
  reaches that seq (at most ``[serve] gate_wait``), then reads holds and
  stops on the calling thread's read-only connection. For a harness with
  nothing committed since serve started, the newest seq of the whole store
  stands in (rows acknowledged before a restart may not be evaluated yet).
  When another process holds the lease, the store's cursor is the watermark.
- :class:`ServeRecall` is the call book's memory of the store on those
  readers; a store error there means "cannot store now" (503).

A read connection that fails is dropped so the next read opens the store
anew: after an I/O error, the old descriptor may never work again even when
the disk is back.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence

from engine.journal.errors import StoreUnavailable
from engine.journal.queue import JournalWriter, Ticket
from engine.journal.rows import InsertRow
from engine.serve.ports import GateState, GateUnavailable, read_state
from engine.serve.recall import StoreRecall

#: How long a request waits for the commit of its rows before it is told 503.
ACK_TIMEOUT_S = 2.0


class Watermark:
    """The seq up to which serve's evaluator has evaluated, a way to wait for it, and its pace.

    Under load the evaluator, caught up, lingers a little before its next step
    (:meth:`linger`) so rows gather into fewer, larger batches: each batch is a
    transaction, and each of its commits also empties the journal writer's page
    cache. A gate that starts waiting ends the linger at once, so read-your-writes
    waits no longer than it did.
    """

    def __init__(self) -> None:
        self.seq = 0
        self._cond = threading.Condition()
        self._waiters = 0
        self._wanted = threading.Event()

    def advance(self, seq: int) -> None:
        with self._cond:
            if seq > self.seq:
                self.seq = seq
                self._cond.notify_all()

    def wait_for(self, target: int, timeout: float) -> bool:
        """Whether the watermark reached ``target`` within ``timeout`` seconds."""
        with self._cond:
            if self.seq >= target:
                return True
            self._waiters += 1
            self._wanted.set()
            try:
                return self._cond.wait_for(lambda: self.seq >= target, timeout)
            finally:
                self._waiters -= 1

    def linger(self, seconds: float) -> None:
        """Wait up to ``seconds``, or not at all while (or once) a gate waits for the watermark."""
        if self._waiters:
            return
        self._wanted.wait(seconds)
        self._wanted.clear()


class WriterJournal:
    """Serve's journal port: group commit, acknowledged after it, newest seq per harness."""

    def __init__(self, writer: JournalWriter, timeout_s: float = ACK_TIMEOUT_S) -> None:
        self.writer = writer
        self.timeout_s = timeout_s
        #: harness -> the newest seq committed for it (the gate's read-your-writes target)
        self.latest: dict[str, int] = {}

    def submit(self, rows: Sequence[InsertRow]) -> object:
        return self.writer.submit(rows)

    def acknowledge(self, token: object) -> None:
        assert isinstance(token, Ticket)
        self.writer.acknowledge(token, self.timeout_s)
        latest = self.latest
        for offset, row in enumerate(token.rows):
            harness = row[4]
            seq = token.first_seq + offset
            if latest.get(harness, 0) < seq:
                latest[harness] = seq


class ServeRecall(StoreRecall):
    """:class:`StoreRecall` on serve's readers: a store error is "cannot store now" (503).

    The read connection that failed is dropped, so the next question opens the
    store anew (after an I/O error the old descriptor may never work again).
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        loop_guard: int,
        drop: Callable[[], None],
    ) -> None:
        super().__init__(connect, loop_guard)
        self.drop = drop

    def run_started(self, harness: str, run: str) -> bool:
        try:
            return super().run_started(harness, run)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def streak(self, harness: str, run: str | None) -> tuple[str, str, int] | None:
        try:
            return super().streak(harness, run)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def editors(self, path: str, since_ms: int) -> dict[str, int]:
        try:
            return super().editors(path, since_ms)
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        self.drop()
        return StoreUnavailable(f"cannot read the store: {exc}")


class WatermarkGate:
    """The gate's port in serve: wait for the evaluator to see the harness's rows, then read."""

    def __init__(
        self,
        journal: WriterJournal,
        watermark: Watermark,
        reader: Callable[[], sqlite3.Connection],
        acting: Callable[[], bool],
        wait_s: float,
        drop_reader: Callable[[], None] = lambda: None,
    ) -> None:
        self.journal = journal
        self.watermark = watermark
        self.reader = reader
        self.acting = acting
        self.wait_s = wait_s
        self.drop_reader = drop_reader

    def state(self, harness: str, run: str | None, *, gated: bool) -> tuple[GateState, bool]:
        holds = gated
        try:
            target = self.journal.latest.get(harness) if gated else 0
            if target is None:  # nothing committed for it since serve started: be safe
                row = self.reader().execute("SELECT MAX(seq) FROM rule_journal").fetchone()
                target = int(row[0] or 0)
            late = bool(target) and self.watermark.seq < target and not self._wait(target)
        except sqlite3.Error as exc:
            self.drop_reader()
            raise GateUnavailable(f"cannot read the evaluator's progress: {exc}") from None
        try:
            return self._read(harness, run, holds), late
        except GateUnavailable as exc:
            # One more try: after a brief wait when the store was locked (a checkpoint
            # can lock briefly), else on a new connection (the old one may have met an
            # I/O error on a disk that has come back since).
            if exc.busy:
                time.sleep(0.05)
            else:
                self.drop_reader()
            try:
                return self._read(harness, run, holds), late
            except GateUnavailable:
                self.drop_reader()
                raise

    def _read(self, harness: str, run: str | None, holds: bool) -> GateState:
        try:
            conn = self.reader()  # opening it can fail too (the disk is away)
        except sqlite3.Error as exc:
            raise GateUnavailable(f"cannot open the store to read holds: {exc}") from None
        return read_state(conn, harness, run, holds=holds)

    def _wait(self, target: int) -> bool:
        if self.acting():
            return self.watermark.wait_for(target, self.wait_s)
        deadline = time.monotonic() + self.wait_s  # another process acts: watch its cursor
        from engine.rules.evaluation.schema import LIVE_CURSOR

        while True:
            row = (
                self.reader()
                .execute("SELECT seq FROM rule_cursor WHERE name = ?", (LIVE_CURSOR,))
                .fetchone()
            )
            if row is not None and int(row[0]) >= target:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
