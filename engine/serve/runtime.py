"""The long-running parts of ``harness serve``: writer, evaluator, readers, use cases.

- The writer is :class:`engine.journal.queue.JournalWriter`, plugged into the
  use cases as :class:`~engine.serve.adapters.WriterJournal` (acknowledged
  after the group commit); the gate is
  :class:`~engine.serve.adapters.WatermarkGate` (read-your-writes).
- The evaluator runs :func:`engine.rules.authority.lease.serve` on its own thread and
  connection behind the store lease (holder ``serve@…``), woken by every
  commit; after each step it advances the
  :class:`~engine.serve.adapters.Watermark`, the seq up to which it has
  evaluated. A store error (locked, full, read-only, I/O) makes it back off
  and rebuild on a new connection, not die.
- Readers: one read-only connection per thread, dropped after a store error
  and opened anew on the next read, and after the writer reopened the store
  (an old connection may read a remounted disk's old file without an error);
  the evaluator reopens its connection then too.
- A flusher thread copies serve's persisted counters into the store every
  second (``journal_counters``, ``serve_*``) for ``harness doctor``.
- :attr:`ServeRuntime.fatal` names what serve cannot recover from (the store
  is corrupt, the evaluator cannot be built): the server then exits non-zero
  so a supervisor restarts it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import HarnessConfig
from engine.journal.queue import JournalWriter
from engine.journal.writer import add_counter
from engine.rules.authority.lease import Lease, serve
from engine.rules.authority.recovery import FaultRide, Reconnect
from engine.serve.adapters import (
    ServeRecall,
    Watermark,
    WatermarkGate,
    WriterJournal,
)
from engine.serve.calls import CallBook
from engine.serve.derive import Deriver
from engine.serve.handler import HookHandler
from engine.serve.metrics import ServeMetrics
from engine.serve.receiver import OtlpReceiver
from engine.serve.verdict import release_command
from engine.store.db import connect
from engine.store.txn import immediate

if TYPE_CHECKING:
    from engine.rules.language.sources import FollowedRules

READ_BUSY_MS = 2_000
HOLDER_PREFIX = "serve@"
#: Workers for hook and OTLP requests (each waits for its commit and the gate).
WORKERS = 64
#: The evaluator's back-off after a store error, seconds (doubles up to the second).
EVAL_BACKOFF_S = (0.1, 2.0)
#: How long the evaluator, caught up under load, lets rows gather before its next
#: step unless a gate waits (:meth:`~engine.serve.adapters.Watermark.linger`).
#: OTLP ingest, 60,000 records, four pairs against none: 46.5-54.0 µs of CPU a
#: record instead of 51.8-61.7.
EVAL_LINGER_S = 0.03
#: Rows an evaluator step takes at most; a full step left a backlog, so the next starts at once.
EVAL_BATCH = 500


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _say(line: str) -> None:
    sys.stderr.write(f"harness serve: {line}\n")
    sys.stderr.flush()


class ServeRuntime:
    """Writer + evaluator + readers + the use cases for one store. ``start``, then ``close``."""

    def __init__(
        self,
        store: Path,
        config: HarnessConfig,
        rules: Sequence[Any],
        metrics: ServeMetrics,
        *,
        queue_capacity: int = 100_000,
        evaluate: bool = True,
        followed: FollowedRules | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.rules = list(rules)
        #: Where the rules came from; watched when given (an edit reloads them).
        #: The rule files and harness.toml, followed: an edit reloads them (when given).
        self.followed = followed
        self._evaluator_opened = 0  # the writer's ``reopened`` when the evaluator connected
        self.metrics = metrics
        self.writer = JournalWriter(store, capacity=queue_capacity)
        self.evaluate = evaluate
        self.holder = f"{HOLDER_PREFIX}{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease: Lease | None = None
        self.evaluator_error: BaseException | None = None
        self.evaluator_failure: str | None = None
        self.watermark = Watermark()
        self._stop = threading.Event()
        self._ride = FaultRide(
            self._stop,
            on_fault=self._evaluator_failing,
            on_recovered=self._evaluator_recovered,
            backoff_s=EVAL_BACKOFF_S,
        )
        self._wake = threading.Event()
        self.writer.on_commit.append(lambda _seq: self._wake.set())
        self._threads: list[threading.Thread] = []
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="serve-work")
        self._closed = False
        serve_cfg = config.serve
        self.journal = WriterJournal(self.writer)
        book = CallBook(
            Deriver(
                loop_guard=serve_cfg.loop_guard, collision_window_ms=serve_cfg.collision_window_ms
            ),
            ServeRecall(self.reader, serve_cfg.loop_guard, self.drop_reader),
        )
        gate = WatermarkGate(
            self.journal,
            self.watermark,
            self.reader,
            self.acting,
            serve_cfg.gate_wait_ms / 1000,
            self.drop_reader,
        )
        default = store == config.resolved_store_path()
        self.hooks = HookHandler(
            book,
            self.journal,
            gate,
            release=release_command(None if default else str(store)),
            merge_wait_s=serve_cfg.merge_wait_ms / 1000,
        )
        self.receiver = OtlpReceiver(book, self.journal, _wall_ms)

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        self.writer.start()
        if self.evaluate:
            self._spawn("serve-evaluator", self._evaluate)
            if self.followed is not None:
                self.followed.watch(self._stop)
        self._spawn("serve-flush", self._flush_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued (within ``timeout``), release the lease, stop the threads."""
        if self._closed:
            return
        self._closed = True
        try:
            self.writer.close(timeout=timeout)
        except BaseException as exc:  # the writer's own failure: report, keep shutting down
            self.evaluator_error = self.evaluator_error or exc
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(5.0)
        self._flush_counters()
        self.pool.shutdown(wait=True, cancel_futures=True)
        with self._readers_lock:
            for conn in self._readers:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    # -- health ---------------------------------------------------------------
    def acting(self) -> bool:
        return self.lease is not None and self.lease.held

    @property
    def fatal(self) -> str | None:
        """What serve cannot recover from (then it exits non-zero), or None."""
        if self.writer.error is not None:
            return f"journal writer stopped: {self.writer.error}"
        if self.evaluator_error is not None:
            return (
                f"evaluator stopped: {type(self.evaluator_error).__name__}: {self.evaluator_error}"
            )
        return None

    def health(self) -> tuple[bool, dict[str, object]]:
        """(healthy, details): the writer writes and the evaluator evaluates."""
        failing = self.writer.failure
        writer = (
            f"stopped: {self.writer.error}"
            if self.writer.error is not None
            else "closed"
            if self._closed
            else f"failing: {failing}"
            if failing
            else "running"
        )
        evaluator_ok = not self.evaluate or (
            self.evaluator_error is None and self.evaluator_failure is None
        )
        details: dict[str, object] = {
            "writer": writer,
            "evaluator": (
                "disabled"
                if not self.evaluate
                else "running"
                if evaluator_ok
                else f"failing: {self.evaluator_failure or self.evaluator_error}"
            ),
            "acting": self.acting(),
            "holder": self.holder,
            "queued": self.writer.queued,
        }
        store = self._store_health()
        if store is not None:
            details["store"] = store
        return writer == "running" and evaluator_ok and store is None, details

    def _store_health(self) -> str | None:
        """None when the store reads; else why not (a corrupt store must not look healthy)."""
        try:
            self.reader().execute("SELECT MAX(seq) FROM rule_journal").fetchone()
        except sqlite3.Error as exc:
            self.drop_reader()  # the next check opens the store anew
            return f"cannot read the store: {exc}"
        return None

    # -- store reads ----------------------------------------------------------------
    def reader(self) -> sqlite3.Connection:
        """This thread's read-only connection, opened anew after the writer reopened the store.

        A connection from before a store fault may go on reading the old file's
        cached pages without an error once the disk is back (a remount): the
        gate would miss every hold stored since. So a reader opened before the
        committer's last reopen is closed, and the store opened again.
        """
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.opened != self.writer.reopened:
            self.drop_reader()
            conn = None
        if conn is None:
            opened = self.writer.reopened
            conn = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {READ_BUSY_MS}")
            local.conn, local.opened = conn, opened
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def drop_reader(self) -> None:
        """Close this thread's read connection after a store error; the next read reopens."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            return
        self._local.conn = None
        with self._readers_lock:
            if conn in self._readers:
                self._readers.remove(conn)
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    def store_metrics(self) -> str:
        """The store's Prometheus families (``harness metrics``), read on this thread."""
        from engine.rules.metrics import collect, render_prometheus

        try:
            return render_prometheus(collect(self.reader()))
        except sqlite3.Error:
            self.drop_reader()
            raise

    # -- threads -------------------------------------------------------------
    def _evaluate(self) -> None:
        """Act while holding the lease; ride out store errors on new connections."""
        try:
            self._ride.run(self._evaluate_once)
        except BaseException as exc:  # corrupt, or not the store's: /healthz says so, serve ends
            self.evaluator_error = exc

    def _evaluator_failing(self, why: str) -> None:
        self.evaluator_failure = why

    def _evaluator_recovered(self) -> None:
        self.evaluator_failure = None

    def _evaluate_once(self) -> None:
        from engine.rules.authority.lease import SERVE, ruleset_digest
        from engine.rules.authority.lifecycle_run import open_live

        opened = self.writer.reopened
        conn = connect(self.store, create=False, check_same_thread=True)
        self._evaluator_opened = opened
        try:
            lease = Lease(
                conn,
                holder=self.holder,
                role=SERVE,
                ruleset=ruleset_digest(self.rules, self.config.rules),
            )
            self.lease = lease
            followed = self.followed

            def build() -> Any:
                if followed is not None and followed.changed.is_set() and followed.reload():
                    self.rules, self.config = followed.rules, followed.config
                    lease.set_ruleset(ruleset_digest(self.rules, self.config.rules))
                evaluator, _policy = open_live(
                    conn, self.rules, self.config, lease=lease, batch_size=EVAL_BATCH
                )
                self._ride.working()
                return evaluator

            serve(
                lease,
                build,
                self._stop,
                on_step=self._stepped,
                idle_wait=self._idle,
                rebuild=followed.changed.is_set if followed is not None else None,
                pace=self._pace,
            )
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _stepped(self, result: object) -> None:
        if self._evaluator_opened != self.writer.reopened:
            raise Reconnect  # the writer opened the store anew: this one may read the old file
        cursor = getattr(result, "cursor", None)
        if isinstance(cursor, int):
            self.watermark.advance(cursor)

    def _pace(self, result: object) -> None:
        """After a step that caught up, let rows gather a moment (a waiting gate cuts it short)."""
        if getattr(result, "rows", 0) < EVAL_BATCH:
            self.watermark.linger(EVAL_LINGER_S)

    def _idle(self) -> float:
        """Wait for the next commit (or the poll interval) here; ``serve`` then waits 0 s."""
        self._wake.wait(0.5)
        self._wake.clear()
        return 0.0

    def _flush_loop(self) -> None:
        while not self._stop.wait(1.0):
            self._flush_counters()

    def _flush_counters(self) -> None:
        deltas = self.metrics.unflushed()
        if not deltas:
            return
        try:
            conn = connect(self.store, create=False)
            try:
                with immediate(conn):
                    for name, delta in deltas.items():
                        add_counter(conn, name, delta)
            finally:
                conn.close()
        except Exception:  # counted again next time: put the deltas back
            for name, delta in deltas.items():
                short = name.removeprefix("serve_")
                self.metrics.flushed[short] = self.metrics.flushed.get(short, 0) - delta
