"""A replay's candidate pass in a second thread, on its own connection, while Python evaluates.

Why: on a large journal the candidate query of a one-pass replay (see
:meth:`~engine.rules.evaluation.candidates.CandidatePlan.scan_where`) is
seconds of work inside SQLite (a pass over the table, and the rules' gates as
correlated subqueries), and the evaluation of the rows it returns is seconds
of Python; run one after the other they add up. SQLite releases the GIL while
it steps a statement, so the pass can run on the second core while this
thread runs the tallies and evaluates rows.

How, and why this way:

- The producer thread has its own read-only connection: one connection used
  by two threads at once has one error state, so an error in one thread could
  be reported (or lost) in the other. It holds its own copies of the shape
  tables its terms test (temp tables are per connection) and never touches
  the replay's connection.
- It hands over seqs, not rows: each chunk of the range is one statement
  returning ``group_concat(seq)``, so it takes the GIL once per chunk. A
  thread that built each row's tuple would take the GIL for every row and
  wait up to a switch interval (5 ms) each time this thread is busy, which
  leaves the two threads taking turns (measured: no gain at all). This
  thread reads the rows of each chunk by seq, with the plan's answer columns,
  from the replay's connection, so every value is read by the same ``SELECT``
  as before.
- Terms gated by a tally (``seq IN`` its table, :mod:`~engine.rules.evaluation.tallies`)
  are left out of the pass: their rows are read from the tally tables once the
  tallies have run (a seek per row), so the pass starts before the tallies
  and runs beside them. The union of both is exactly the plan's union of terms.
- The queue holds at most :data:`DEPTH` chunks of seqs, so memory stays
  bounded whatever the consumer does; :meth:`PipelinedCandidates.close` stops
  the producer at once (``interrupt``) and a producer waiting on a full
  queue gives up when told to stop. An error in the producer is raised here,
  the same ``sqlite3`` exception, where its chunk would have been read.

The rows are the plan's rows in seq order, each once, so the replay, and its
fires, are the same as reading them in this thread (the equivalence tests run
both). The rows of the range never change under a backtest (only a prune
deletes rows, from the start of the journal), so two connections read the
same rows.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
import time
from bisect import bisect_right
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

from engine.errors import HarnessError
from engine.rules.evaluation.candidates import CandidatePlan
from engine.rules.evaluation.shape_tables import ShapeTable

if TYPE_CHECKING:
    from engine.rules.evaluation.tallies import Tally

#: Journal rows per producer statement (a chunk of the range, by seq).
CHUNK = 65_536
#: Chunks the producer may run ahead of the consumer.
DEPTH = 64
#: Seqs per read of rows by seq (one cached statement: a shorter list is padded).
FETCH = 500
#: A range with fewer rows is read in this thread (a thread is not worth starting).
MIN_ROWS = 200_000
#: How long a blocked producer or consumer waits before checking for a stop.
_POLL_S = 0.05
#: How long :meth:`PipelinedCandidates.close` waits for the producer to end.
_CLOSE_S = 10.0

_END = object()

Tables = Sequence[tuple[ShapeTable, int, int, tuple[tuple[str, ...], ...]]]
Tallies = Sequence[tuple["Tally", int, int, int]]


class PipelinedCandidates:
    """A plan's candidate rows for ``first..last``, found by a producer thread (see the module).

    Built by :func:`start_pipeline`; :meth:`rows` yields the rows (call it
    after the tallies ran on ``conn``), :meth:`close` ends the producer.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        other: sqlite3.Connection,
        plan: CandidatePlan,
        tallies: Tallies,
        tables: Tables,
        first_last: tuple[int, int],
    ) -> None:
        self._conn = conn
        self._other = other
        self._plan = plan
        self._first, self._last = first_last
        terms = plan.terms or ()
        # A term testing a tally's table only admits rows in that table.
        tallied = {t.clause(name) for t, *_ in tallies for name in t.gates}
        self._tally_terms = tuple(t for t in terms if tallied & set(t.extra))
        self._tally_tables = sorted(name for t, *_ in tallies for name in t.tables.values())
        rest = tuple(t for t in terms if t not in self._tally_terms)
        self._where = CandidatePlan(rest, True, plan.order).scan_where() if rest else ("0", [])
        self._tables = [t for t in tables if t[0].name in self._where[0]]
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=DEPTH)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="backtest-candidates")
        self._thread.daemon = True  # never keeps a process alive; close() joins it
        self._thread.start()

    # -- the producer thread ------------------------------------------------------

    def _produce(self) -> None:
        try:
            for table, after_at, last_seq, indexes in self._tables:
                table.create(self._other, after_at, last_seq, indexes)
            where, values = self._where
            sql = (
                "SELECT group_concat(seq) FROM rule_journal NOT INDEXED"
                f" WHERE seq BETWEEN ? AND ? AND ({where})"
            )
            lo = self._first
            while lo <= self._last and not self._stop.is_set():
                hi = min(self._last, lo + CHUNK - 1)
                found = self._other.execute(sql, (lo, hi, *values)).fetchone()[0]
                self._put((hi, found))
                lo = hi + 1
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, which raises it
            if not self._stop.is_set():
                self._put(exc)

    def _put(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    # -- the consumer (the replay's thread) ---------------------------------------

    def _get(self) -> Any:
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("the backtest's candidate reader stopped") from None

    def rows(self, select: str) -> Generator[tuple[Any, ...], None, None]:
        """The plan's rows in seq order (``select``'s columns, then the plan's answer columns)."""
        tallied = self._tallied_seqs()
        head, params = self._plan.with_columns(select)
        marks = ", ".join("?" * FETCH)
        sql = f"{head} WHERE seq IN ({marks}) ORDER BY seq"
        done = 0  # tallied seqs merged so far
        while True:
            item = self._get()
            if isinstance(item, BaseException):
                raise item
            hi, found = (self._last, None) if item is _END else item
            seqs = [int(s) for s in found.split(",")] if found else []
            upto = bisect_right(tallied, hi, done)
            if upto > done:
                seqs = sorted({*seqs, *tallied[done:upto]})
                done = upto
            else:
                seqs.sort()
            for i in range(0, len(seqs), FETCH):
                part = seqs[i : i + FETCH]
                part += [part[-1]] * (FETCH - len(part))  # a repeated seq is read once
                yield from self._conn.execute(sql, (*params, *part))
            if item is _END:
                return

    def _tallied_seqs(self) -> list[int]:
        """The rows the tally-gated terms admit (their tables hold seqs of the range only)."""
        if not self._tally_terms:
            return []
        where, values = CandidatePlan(self._tally_terms, True, self._plan.order).scan_where()
        union = " UNION ".join(f"SELECT seq FROM {name}" for name in self._tally_tables)
        sql = (
            f"SELECT seq FROM rule_journal WHERE seq IN ({union})"
            f" AND +seq BETWEEN ? AND ? AND ({where}) ORDER BY seq"
        )
        return [int(r[0]) for r in self._conn.execute(sql, (self._first, self._last, *values))]

    def close(self) -> None:
        """Stop the producer (interrupting its statement), wait for it, close its connection."""
        self._stop.set()
        deadline = time.monotonic() + _CLOSE_S
        # Again until it ends: an interrupt that lands between two statements is lost.
        while self._thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(sqlite3.ProgrammingError):
                self._other.interrupt()
            self._thread.join(timeout=_POLL_S)
        if not self._thread.is_alive():
            self._other.close()


def start_pipeline(
    conn: sqlite3.Connection,
    plan: CandidatePlan,
    tallies: Tallies,
    tables: Tables,
    first_last: tuple[int, int],
    *,
    rows: int,
    force: bool = False,
) -> PipelinedCandidates | None:
    """The plan's rows read by a producer thread, or None to read them in this thread.

    A pipeline runs for a one-pass plan over at least :data:`MIN_ROWS` rows
    (with ``force``, for any filtered plan), when ``conn`` is a store file with
    no transaction open (a second connection would not see its uncommitted
    rows) and a second read-only connection to it opens.
    """
    if plan.terms is None or conn.in_transaction:
        return None
    if not force and (not plan.one_pass or rows < MIN_ROWS):
        return None
    path = _store_file(conn)
    if not path:
        return None
    from engine.store.db import connect

    try:
        other = connect(path, readonly=True, check_same_thread=False)
    except (HarnessError, sqlite3.Error):
        return None
    return PipelinedCandidates(conn, other, plan, tallies, tables, first_last)


def _store_file(conn: sqlite3.Connection) -> str:
    """The file behind ``conn``'s main database ("" for an in-memory one)."""
    for _, name, path in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(path or "")
    return ""
