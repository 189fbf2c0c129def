"""The long-running parts of ``harness serve``: journal writer, acting evaluator, store reads.

- The writer is :class:`engine.journal.queue.JournalWriter`: requests only
  offer rows (a lock and an append; ``/v1/logs`` offers a request's checked
  rows at once with ``offer_checked``), so a request never waits for the
  store; a full queue drops and counts.
- The evaluator runs :func:`engine.rules.lease.serve` on its own thread and
  connection with the lifecycle's live evaluator, behind the store lease; its
  holder name starts with ``serve@`` so the console can say serve is acting.
- Gate and ``/metrics`` reads run on a small thread pool with read-only
  connections, off the event loop, with a short busy timeout so a locked
  store turns into a prompt 503 rather than a hung hook.
- A flusher thread copies serve's persisted counters into the store every
  second (``journal_counters``, ``serve_*``) for ``harness doctor``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from engine.config import HarnessConfig
from engine.journal.queue import JournalWriter
from engine.journal.writer import add_counter
from engine.rules.lease import Lease, serve
from engine.serve.metrics import ServeMetrics
from engine.store.db import connect

T = TypeVar("T")
READ_BUSY_MS = 2_000
HOLDER_PREFIX = "serve@"


class ServeRuntime:
    """Writer + evaluator + readers for one store. ``start`` then ``close`` (idempotent)."""

    def __init__(
        self,
        store: Path,
        config: HarnessConfig,
        rules: Sequence[Any],
        metrics: ServeMetrics,
        *,
        queue_capacity: int = 100_000,
        evaluate: bool = True,
    ) -> None:
        self.store = store
        self.config = config
        self.rules = list(rules)
        self.metrics = metrics
        self.writer = JournalWriter(store, capacity=queue_capacity)
        self.evaluate = evaluate
        self.holder = f"{HOLDER_PREFIX}{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease: Lease | None = None
        self.evaluator_error: BaseException | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="serve-read")
        self._closed = False
        self._loop_conn: sqlite3.Connection | None = None

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        self.writer.start()
        if self.evaluate:
            self._spawn("serve-evaluator", self._evaluate)
        self._spawn("serve-flush", self._flush_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self, timeout: float = 4.0) -> None:
        """Drain the queue, release the lease, stop the threads (within ``timeout``)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.writer.close(timeout=timeout / 2)
        except BaseException as exc:  # the writer's own failure: report, keep shutting down
            self.evaluator_error = self.evaluator_error or exc
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout / 2)
        self._flush_counters()
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self._readers_lock:
            for conn in self._readers:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    # -- health ---------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, object]]:
        """(healthy, details): the writer and the evaluator threads run."""
        writer_ok = self.writer.error is None and not self._closed
        evaluator = next((t for t in self._threads if t.name == "serve-evaluator"), None)
        evaluator_ok = not self.evaluate or (evaluator is not None and evaluator.is_alive())
        details: dict[str, object] = {
            "writer": "running" if writer_ok else f"stopped: {self.writer.error or 'closed'}",
            "evaluator": (
                "disabled"
                if not self.evaluate
                else "running"
                if evaluator_ok
                else f"stopped: {self.evaluator_error or 'not running'}"
            ),
            "acting": bool(self.lease is not None and self.lease.held),
            "holder": self.holder,
        }
        return writer_ok and evaluator_ok, details

    # -- store reads off the event loop -----------------------------------------
    def reader(self) -> sqlite3.Connection:
        """This pool thread's read-only connection (opened once)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {READ_BUSY_MS}")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def loop_reader(self) -> sqlite3.Connection:
        """The event loop's read-only connection: busy_timeout 0, so it never waits.

        A WAL reader is not blocked by the writer, so the gate's two indexed
        reads normally take tens of microseconds inline; if the store is ever
        locked, the caller retries on the pool (which may wait briefly).
        """
        if self._loop_conn is None:
            conn = sqlite3.connect(
                f"file:{self.store}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA busy_timeout = 0")
            self._loop_conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return self._loop_conn

    # -- threads -------------------------------------------------------------
    def _evaluate(self) -> None:
        from engine.rules.lifecycle_run import open_live

        conn = connect(self.store, check_same_thread=True)
        try:
            lease = Lease(conn, holder=self.holder)
            self.lease = lease

            def build() -> Any:
                evaluator, _policy = open_live(conn, self.rules, self.config, lease=lease)
                return evaluator

            serve(lease, build, self._stop)
        except BaseException as exc:  # surfaced by /healthz
            self.evaluator_error = exc
        finally:
            conn.close()

    def _flush_loop(self) -> None:
        while not self._stop.wait(1.0):
            self._flush_counters()

    def _flush_counters(self) -> None:
        deltas = self.metrics.unflushed()
        if not deltas:
            return
        try:
            conn = connect(self.store)
            try:
                conn.execute("BEGIN IMMEDIATE")
                for name, delta in deltas.items():
                    add_counter(conn, name, delta)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except Exception:  # counted again next time: put the deltas back
            for name, delta in deltas.items():
                short = name.removeprefix("serve_")
                self.metrics.flushed[short] = self.metrics.flushed.get(short, 0) - delta
