"""A replay's candidate pass in producer threads, on their own connections, while Python evaluates.

Why: on a large journal the candidate query of a one-pass replay (see
:meth:`~engine.rules.evaluation.candidates.CandidatePlan.scan_where`) is
seconds of work inside SQLite (a pass over the table, and the rules' gates as
correlated subqueries), and the tallies and the evaluation of the rows it
returns are seconds of Python; run one after the other they add up. SQLite
releases the GIL while it steps a statement, so the pass runs on other cores
while this thread runs the tallies and evaluates rows. :data:`PRODUCERS`
threads share the pass, chunk by chunk: the pass (seconds of C) would
otherwise be the longer of the two, waited for by the evaluation (30 rules
on the 45-day demo journal: the pass ended 4.1 s in with one producer,
2.8-3.0 s in with two).

How, and why this way:

- Each producer thread has its own read-only connection: one connection used
  by two threads at once has one error state, so an error in one thread could
  be reported (or lost) in the other. Each holds its own copies of the shape
  tables its terms test (temp tables are per connection) and never touches
  the replay's connection. One copy in an in-memory database all of them
  attach (SQLite's memdb VFS), made once by one producer while the others
  wait, was measured with the planner then copying the 30-rule set's 77k
  error and failed calls so their gates ran in SQL (the replay's thread got
  39k rows instead of 110k): no faster (17 interleaved pairs, medians
  4.25-4.78 s against 4.44-4.72 s), as the whole command is CPU-bound on
  two cores; the waits it needs were not worth keeping.
- Each chunk of the range (:data:`CHUNK` journal rows) is one statement that
  returns the chunk's rows as one JSON array, so the producer takes the GIL
  once per chunk. A thread that built each row's tuple would take the GIL for
  every row and wait up to a switch interval (5 ms) each time this thread is
  busy, so the two would only take turns (measured: no gain at all). JSON
  holds integers, text and NULL exactly; a chunk with any other value (a REAL
  or a BLOB, left out of its array) or text that is not UTF-8 is read again
  here by seq with the replay's own ``SELECT``, so every row is what that
  ``SELECT`` returns (errors included).
- Terms gated by a tally (``seq IN`` its table, :mod:`~engine.rules.evaluation.tallies`)
  are left out of the pass: their rows are read by seq once the tallies have
  run, and merged in, so the pass starts before the tallies and runs beside
  them. The union of both is exactly the plan's union of terms.
- The first producer reads the tallies' rows before its share of the pass,
  as columns (:mod:`~engine.rules.evaluation.tally_columns`), so SQLite's
  part of that read runs beside this thread's, which only decodes them and
  counts (30 rules on the 45-day demo journal: 318k file edits, about half a
  second of SQLite off this thread). :meth:`PipelinedCandidates.tally_spans`
  hands them over, tally by tally, before any candidate chunk.
- Producers claim chunks in order as they come free, so the one that read
  the tallies' rows first takes fewer. At most :data:`BUDGET` bytes of chunks
  wait whatever the consumer does, besides the chunk it waits for.
  :meth:`PipelinedCandidates.close` stops the producers at once
  (``interrupt``), and a producer waiting for room gives up when told to stop.
  An error in a producer is raised here, the same ``sqlite3`` exception,
  where its chunk would have been read.

The rows are the plan's rows in seq order, each once, so the replay and its
fires are the same as reading them in this thread (the equivalence tests run
both). The rows of the range never change under a backtest (``at`` and the
rows up to the last seq are fixed; only a prune deletes rows, from the start
of the journal), so two connections read the same rows.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Generator, Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from engine.errors import HarnessError
from engine.rules.evaluation.candidates import CandidatePlan
from engine.rules.evaluation.rows_json import EXACT, decoded
from engine.rules.evaluation.shape_tables import ShapeTable
from engine.rules.evaluation.tally_columns import TallyFeed
from engine.rules.evaluation.window import ROW_SELECT, ROW_VALUES

if TYPE_CHECKING:
    from engine.rules.evaluation.tallies import Tally

#: Journal rows per producer statement (a chunk of the range, by seq).
CHUNK = 16_384
#: Bytes of chunks the producer may have waiting for the consumer.
BUDGET = 16 << 20
#: Seqs per read of rows by seq (one cached statement: a shorter list is padded).
FETCH = 500
#: Producer threads, each on its own connection, claiming chunks as they come free: SQLite
#: lets go of the GIL while it steps, so with this thread's Python they fill two cores.
PRODUCERS = 2
#: The producer connection's page cache (KiB); SQLite's default is 2,000.
CACHE_KIB = 256
#: A range with fewer rows is read in this thread (a thread is not worth starting).
MIN_ROWS = 200_000
#: How long a blocked producer or consumer waits before checking for a stop.
_POLL_S = 0.05
#: How long :meth:`PipelinedCandidates.close` waits for the producer to end.
_CLOSE_S = 10.0

#: The producer threads' name.
PRODUCER = "backtest-candidates"
_SEQ = itemgetter(0)

Tables = Sequence[tuple[ShapeTable, int, int, tuple[tuple[str, ...], ...]]]
Tallies = Sequence[tuple["Tally", int, int, int]]
Row = tuple[Any, ...]


class _Producer:
    """One producer thread and its own connection."""

    def __init__(self, conn: sqlite3.Connection, produce: Callable[[_Producer], None]) -> None:
        self.conn = conn
        # A daemon never keeps a process alive; ``close`` joins it.
        self.thread = threading.Thread(target=produce, args=(self,), name=PRODUCER, daemon=True)


class _Chunks:
    """The chunks of the pass: claimed by producers in order, read, taken by the consumer.

    Producers claim the next chunk when they are free, so one that started
    late (the first reads the tallies' rows first) takes fewer. The chunks
    waiting for the consumer share :data:`BUDGET` bytes, except the one the
    consumer waits for: it always goes in, so no producer ever waits for room
    that only the consumer can make while the consumer waits for it.
    """

    def __init__(self, count: int, stop: threading.Event) -> None:
        self.count = count
        self._stop = stop
        self._next = 0  # the next chunk a producer claims
        self._want = 0  # the chunk the consumer waits for
        self._ready: dict[int, tuple[Any, int]] = {}
        self._bytes = 0
        self._cond = threading.Condition()

    def claim(self) -> int | None:
        with self._cond:
            if self._next >= self.count or self._stop.is_set():
                return None
            self._next += 1
            return self._next - 1

    def put(self, j: int, item: Any, size: int) -> None:
        with self._cond:
            while (
                j != self._want
                and self._bytes
                and self._bytes + size > BUDGET
                and not self._stop.is_set()
            ):
                self._cond.wait(_POLL_S)
            if self._stop.is_set():
                return
            self._ready[j] = (item, size)
            self._bytes += size
            self._cond.notify_all()

    def take(self, j: int, alive: Callable[[], bool]) -> Any:
        with self._cond:
            self._want = j
            self._cond.notify_all()
            while j not in self._ready:
                if not alive():
                    raise RuntimeError("the backtest's candidate reader stopped")
                self._cond.wait(_POLL_S)
            item, size = self._ready.pop(j)
            self._bytes -= size
            self._cond.notify_all()
            return item


class PipelinedCandidates:
    """A plan's candidate rows for ``first..last``, found by producer threads (see the module).

    Built by :func:`start_pipeline`; :meth:`rows` yields the rows (call it
    after the tallies ran on ``conn``), :meth:`close` ends the producers.
    The consumer takes the chunks by index, so the rows come in seq order
    whichever producer read each.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        others: Sequence[sqlite3.Connection],
        plan: CandidatePlan,
        tallies: Tallies,
        tables: Tables,
        first_last: tuple[int, int],
    ) -> None:
        self._conn = conn
        self._plan = plan
        self._first, self._last = first_last
        terms = plan.terms or ()
        # A term testing a tally's table only admits rows in that table.
        tallied = {t.clause(name) for t, *_ in tallies for name in t.gates}
        self._tally_terms = tuple(t for t in terms if tallied & set(t.extra))
        self._tally_tables = sorted(name for t, *_ in tallies for name in t.tables.values())
        rest = tuple(t for t in terms if t not in self._tally_terms)
        self._where = CandidatePlan(rest, True, plan.order).scan_where() if rest else ("0", [])
        # The shape tables its statement reads (in the terms' gates and the answer columns).
        read = " ".join([self._where[0], *(sql for sql, _ in plan.columns)])
        self._tables = [t for t in tables if t[0].name in read]
        self._stop = threading.Event()
        count = (self._last - self._first) // CHUNK + 1 if self._last >= self._first else 0
        self._chunks = _Chunks(count, self._stop)
        self._tally_feed = TallyFeed(tallies)
        self._producers = [_Producer(other, self._produce) for other in others]
        for producer in self._producers:
            producer.thread.start()

    # -- the producer threads -----------------------------------------------------

    def _chunk_sql(self) -> tuple[str, tuple[Any, ...]]:
        """The statement reading one chunk: (its seqs, its rows as a JSON array).

        A row with a value JSON would not hold exactly (REAL, or a BLOB it
        refuses) is left out of the array, so the consumer, finding fewer rows
        than seqs, reads that chunk by seq instead.
        """
        answers = self._plan.columns
        columns = ", ".join([ROW_VALUES, *(sql for sql, _ in answers)])
        where, _ = self._where
        sql = (
            "SELECT group_concat(seq),"
            f" CAST(json_group_array(json_array({columns})) FILTER (WHERE {EXACT}) AS BLOB)"
            f" FROM rule_journal NOT INDEXED WHERE seq BETWEEN ? AND ? AND ({where})"
        )
        return sql, tuple(v for _, vs in answers for v in vs)

    def _produce(self, producer: _Producer) -> None:
        other = producer.conn
        j = None
        try:
            if producer is self._producers[0]:  # the tallies' rows: the replay reads them first
                self._tally_feed.read(other, self._stop)
            for table, after_at, last_seq, indexes in self._tables:
                table.create(other, after_at, last_seq, indexes)
            sql, head = self._chunk_sql()
            values = self._where[1]
            while (j := self._chunks.claim()) is not None:
                lo = self._first + j * CHUNK
                hi = min(self._last, lo + CHUNK - 1)
                found, rows = other.execute(sql, (*head, lo, hi, *values)).fetchone()
                size = len(rows or b"") + len(found or "")
                self._chunks.put(j, (hi, found, rows), size)
        except BaseException as exc:  # handed to the consumer, which raises it
            if not self._stop.is_set():
                if j is None:
                    j = self._chunks.claim()  # raised where the next chunk would be read
                if j is not None:
                    self._chunks.put(j, exc, 0)
                self._tally_feed.fail(exc)

    # -- the consumer (the replay's thread) ---------------------------------------

    def tally_spans(self, i: int) -> Generator[Any, None, None]:
        """Tally ``i``'s rows as the first producer read them (see :class:`TallyFeed`)."""
        return self._tally_feed.spans(i, self._producers[0].thread.is_alive)

    def rows(self) -> Generator[Row, None, None]:
        """The plan's rows in seq order (``ROW_SELECT``'s columns, then the answer columns)."""
        tallied = self._tallied_seqs()
        done = 0  # tallied seqs merged so far
        chunks = self._chunks.count
        for j in range(chunks + 1):
            if j < chunks:
                item = self._chunks.take(j, self._alive)
                if isinstance(item, BaseException):
                    raise item
                hi, found, blob = item
            else:  # past the last chunk: the tallied seqs left, if any
                hi, found, blob = self._last, None, None
            upto = bisect_right(tallied, hi, done)
            extra, done = tallied[done:upto], upto
            seqs = [int(s) for s in found.split(",")] if found else []
            rows = decoded(blob, len(seqs)) if seqs else None
            if seqs and rows is None:  # a value JSON does not hold exactly: read them here
                yield from self._fetch(sorted({*seqs, *extra}))
            elif extra:
                merged = {r[0]: r for r in (*(rows or ()), *self._fetch(extra))}
                yield from sorted(merged.values(), key=_SEQ)
            elif rows:
                yield from rows

    def _alive(self) -> bool:
        return any(p.thread.is_alive() for p in self._producers)

    def _fetch(self, seqs: Sequence[int]) -> Iterable[Row]:
        """The rows with these seqs (ascending), read with the replay's own ``SELECT``."""
        head, params = self._plan.with_columns(ROW_SELECT)
        sql = f"{head} WHERE seq IN ({', '.join('?' * FETCH)}) ORDER BY seq"
        out: list[Row] = []
        for i in range(0, len(seqs), FETCH):
            part = list(seqs[i : i + FETCH])
            part += [part[-1]] * (FETCH - len(part))  # a repeated seq is read once
            out.extend(self._conn.execute(sql, (*params, *part)))
        return out

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
        """Stop the producers (interrupting their statements), wait, close their connections."""
        self._stop.set()
        deadline = time.monotonic() + _CLOSE_S
        for producer in self._producers:
            # Again until it ends: an interrupt that lands between two statements is lost.
            while producer.thread.is_alive() and time.monotonic() < deadline:
                with contextlib.suppress(sqlite3.ProgrammingError):
                    producer.conn.interrupt()
                producer.thread.join(timeout=_POLL_S)
            if not producer.thread.is_alive():
                producer.conn.close()


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
    rows) and plain tuples of ``str`` for rows, and a second read-only
    connection to it opens, in an SQLite with the JSON functions.
    """
    if plan.terms is None or conn.in_transaction:
        return None
    if conn.row_factory is not None or conn.text_factory is not str:
        return None
    if not force and (not plan.one_pass or rows < MIN_ROWS):
        return None
    path = _store_file(conn)
    if not path:
        return None
    from engine.store.db import connect

    others: list[sqlite3.Connection] = []
    for _ in range(PRODUCERS):
        other = _producer_connection(path, connect)
        if other is None:
            break
        others.append(other)
    if not others:
        return None
    return PipelinedCandidates(conn, others, plan, tallies, tables, first_last)


def _producer_connection(path: str, connect: Callable[..., Any]) -> sqlite3.Connection | None:
    """A read-only connection for a producer, or None if it does not open or has no JSON."""
    try:
        other: sqlite3.Connection = connect(path, readonly=True, check_same_thread=False)
    except (HarnessError, sqlite3.Error):
        return None
    try:
        # A pass reads each page once: a small page cache keeps the process's memory as it was.
        other.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        other.execute("SELECT json_group_array(json_array(1))").fetchone()  # an SQLite with JSON
    except sqlite3.Error:
        other.close()
        return None
    return other


def _store_file(conn: sqlite3.Connection) -> str:
    """The file behind ``conn``'s main database ("" for an in-memory one)."""
    for _, name, path in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(path or "")
    return ""
