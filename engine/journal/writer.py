"""Admission: the one place where rows get a ``seq`` and an ``at``.

Why it is shaped this way (seed 004, "One journal is the only input", "Time is
an input"):

- Admission order is the only order live evaluation and a backtest can share,
  so ``seq`` is assigned here, dense and strictly increasing, under SQLite's
  write lock (``BEGIN IMMEDIATE``): the high-water marks are read *inside* the
  lock, so two processes appending at once serialise instead of colliding or
  interleaving.
- ``at`` is ``max(last_at, clock())``: journal time never goes back even when
  the wall clock steps back. One clock reading per batch; every row of a batch
  is admitted at the same instant. The clock is injectable (tests, simulator).
- A batch is one transaction, so a reader never sees half of one, and a crash
  (even ``kill -9``) leaves every committed batch and nothing of the others.
- Ticks: each batch first admits one ``tick`` row per minute boundary of
  journal time crossed since the last tick (at exactly that boundary), so
  holds can clear while nothing else happens. A gap longer than
  :data:`MAX_GAP_TICKS` minutes gets only its last ``MAX_GAP_TICKS`` ticks:
  windows and hold checks only need time to have advanced, and an idle week
  should not become ten thousand rows. Callers may not offer tick rows on the
  live path; the committer is their only writer.
- History import (rows with their own ``at``) goes through the same lock and
  counters; its ``at`` must be non-decreasing and not before the store's last
  ``at``. An atomic import is one transaction: a bad row anywhere admits
  nothing.

Counters (``journal_counters``) live in the store so other processes (stats,
doctor, metrics) see drops and refusals.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, Final

from engine.journal.lines import MAX_LINE_CHARS
from engine.journal.rows import INSERT_COLUMNS, InsertRow, RowError, check_values, row_from_mapping
from engine.record import Record
from engine.store.txn import immediate
from engine.timefmt import iso_ms

Clock = Callable[[], int]
MINUTE_MS = 60_000
#: How far ahead of the wall clock an imported ``at`` may be (clock skew between hosts).
FUTURE_SKEW_MS = 5 * MINUTE_MS
MAX_GAP_TICKS = 1440
HISTORY_BATCH = 50_000

_INSERT_HEAD = f"INSERT OR ROLLBACK INTO rule_journal (seq, {', '.join(INSERT_COLUMNS)}) VALUES "
_ONE_ROW = f"({', '.join('?' * (len(INSERT_COLUMNS) + 1))})"
#: The most rows one INSERT statement carries (a power of two; 16 values each).
_MAX_CHUNK: Final = 256
_CHUNK_SQL: dict[int, str] = {}


def _chunk_sql(k: int) -> str:
    """The INSERT of ``k`` rows in one multi-row VALUES statement (texts cached)."""
    sql = _CHUNK_SQL.get(k)
    if sql is None:
        sql = _CHUNK_SQL[k] = _INSERT_HEAD + ",".join([_ONE_ROW] * k)
    return sql


def insert_rows(conn: sqlite3.Connection, rows: Sequence[tuple[object, ...]]) -> None:
    """Insert full rows (``seq`` first), in the caller's transaction, a few statements per batch.

    Why not ``executemany``: it steps once per row, and each step releases and
    retakes the GIL. In serve, where request threads map records while the
    committer writes, every retake waits for a busy thread to yield, and the
    committer crawled (10-16k rows/s against 25-31k this way, measured with a
    spinning thread beside it); alone it also costs ~40 % more CPU per row. A
    batch goes as power-of-two chunks of at most :data:`_MAX_CHUNK` rows (100
    rows: 64 + 32 + 4), so a handful of statement texts stay prepared in the
    connection's cache.

    The statement is ``INSERT OR ROLLBACK``: a refused row ends the whole
    transaction, which every caller rolls back anyway. A plain INSERT may
    abort alone, so SQLite keeps a statement journal of the pages it changes;
    a chunk changes more than that journal keeps in memory, and every commit
    created, wrote and deleted a temporary file (in serve: half of all
    ``pwrite`` calls, and an ``open`` and ``unlink`` per commit).
    """
    n, i = len(rows), 0
    while i < n:
        k = min(_MAX_CHUNK, 1 << ((n - i).bit_length() - 1))
        conn.execute(_chunk_sql(k), [*chain.from_iterable(rows[i : i + k])])
        i += k


_SET_HEAD = "INSERT INTO journal_counters (name, value) VALUES "
_SET_TAIL = " ON CONFLICT(name) DO UPDATE SET value = excluded.value"
_ADD_SQL = (
    "INSERT INTO journal_counters (name, value) VALUES (?, ?) "
    "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value"
)
_TICK_TAIL = ("tick", "tick", "tick", *([None] * 11))


def wall_clock_ms() -> int:
    """The default clock: wall time in ms since the epoch."""
    return time.time_ns() // 1_000_000


def tick_row(at: int) -> InsertRow:
    """The tick row at journal time ``at``."""
    return (at, *_TICK_TAIL)


class Refusal(Record):
    """One refused row: its position in the offered batch, the field and why."""

    __slots__ = ("field", "index", "problem")
    __match_args__ = ("index", "field", "problem")

    def __init__(self, index: int, field: str, problem: str) -> None:
        self.index: Final = index
        self.field: Final = field
        self.problem: Final = problem


class AdmitResult(Record):
    """What one admission did. ``first_seq``/``last_seq`` are 0 when nothing was stored."""

    __slots__ = ("admitted", "at", "first_seq", "last_seq", "refused", "ticks")
    __match_args__ = ("admitted", "ticks", "refused", "first_seq", "last_seq", "at")

    def __init__(
        self,
        admitted: int,
        ticks: int,
        refused: tuple[Refusal, ...],
        first_seq: int,
        last_seq: int,
        at: int,
    ) -> None:
        self.admitted: Final = admitted
        self.ticks: Final = ticks
        self.refused: Final = refused
        self.first_seq: Final = first_seq
        self.last_seq: Final = last_seq
        self.at: Final = at


class ImportResult(Record):
    """What a history import stored (rows from the input, plus synthesised ticks)."""

    __slots__ = (
        "admitted",
        "first_at",
        "first_seq",
        "last_at",
        "last_seq",
        "skipped_ticks",
        "ticks",
    )
    __match_args__ = (
        "admitted",
        "ticks",
        "skipped_ticks",
        "first_seq",
        "last_seq",
        "first_at",
        "last_at",
    )

    def __init__(
        self,
        admitted: int,
        ticks: int,
        skipped_ticks: int,
        first_seq: int,
        last_seq: int,
        first_at: int,
        last_at: int,
    ) -> None:
        self.admitted: Final = admitted
        self.ticks: Final = ticks
        self.skipped_ticks: Final = skipped_ticks
        self.first_seq: Final = first_seq
        self.last_seq: Final = last_seq
        self.first_at: Final = first_at
        self.last_at: Final = last_at


class _Marks:
    """The writer's running high-water marks (mutable: one per committer)."""

    __slots__ = ("last_at", "last_seq", "last_tick_at")

    def __init__(self, last_seq: int, last_at: int, last_tick_at: int | None) -> None:
        self.last_seq = last_seq
        self.last_at = last_at
        self.last_tick_at = last_tick_at


_MARKS_SQL = (
    "SELECT (SELECT value FROM journal_counters WHERE name = 'last_seq'), "
    "(SELECT value FROM journal_counters WHERE name = 'last_at'), "
    "(SELECT value FROM journal_counters WHERE name = 'last_tick_at'), "
    "newest.seq, newest.at FROM (SELECT 1) LEFT JOIN "
    "(SELECT seq, at FROM rule_journal ORDER BY seq DESC LIMIT 1) AS newest"
)


def read_marks(conn: sqlite3.Connection) -> tuple[int, int, int | None]:
    """(last_seq, last_at, last_tick_at) from counters and the newest row.

    Counters survive pruning; the newest row covers a store written before
    counters existed. Call inside the write transaction when the result is used
    to assign ``seq``. One statement: each step a statement takes lets go of
    the GIL, and in serve taking it back waits for a busy request thread.
    """
    seq, at, tick, newest_seq, newest_at = conn.execute(_MARKS_SQL).fetchone()
    last_seq = max(int(seq or 0), newest_seq or 0)
    last_at = max(int(at or 0), newest_at or 0)
    return last_seq, last_at, int(tick) if tick is not None else None


def _set_counters(conn: sqlite3.Connection, marks: list[tuple[str, int]]) -> None:
    """Set named counters in one statement (see :func:`read_marks` on steps)."""
    conn.execute(
        _SET_HEAD + ", ".join(["(?, ?)"] * len(marks)) + _SET_TAIL,
        [*chain.from_iterable(marks)],
    )


def add_counter(conn: sqlite3.Connection, name: str, delta: int) -> None:
    """Add ``delta`` to a persisted counter in its own short transaction."""
    if delta:
        conn.execute(_ADD_SQL, (name, delta))


def read_counters(conn: sqlite3.Connection) -> dict[str, int]:
    return {str(k): int(v) for k, v in conn.execute("SELECT name, value FROM journal_counters")}


def _ticks_between(last_tick_at: int | None, last_at: int, upto: int) -> list[int]:
    """Minute boundaries b with last tick < b <= upto (the newest MAX_GAP_TICKS of them)."""
    first = _next_tick(last_tick_at, last_at)
    if first > upto:
        return []
    last = (upto // MINUTE_MS) * MINUTE_MS
    count = (last - first) // MINUTE_MS + 1
    if count > MAX_GAP_TICKS:
        first = last - (MAX_GAP_TICKS - 1) * MINUTE_MS
    return list(range(first, last + 1, MINUTE_MS))


class _HistoryImport:
    """One history import in progress: the rows still to read, the marks, what is pending.

    Mutable on purpose and private to :meth:`Committer.import_history`, which
    owns the transactions; this reads rows into ``pending`` (with their seq,
    and synthesised ticks between them) one batch at a time.
    """

    def __init__(
        self,
        committer: Committer,
        stream: Iterator[InsertRow],
        *,
        synth_ticks: bool,
        validate: bool,
    ) -> None:
        self.conn = committer.conn
        self.stream = stream
        self.synth_ticks = synth_ticks
        self.validate = validate
        self.m = _Marks(0, 0, None)
        self.pending: list[tuple[Any, ...]] = []
        self.admitted = 0
        self.ticks = 0
        self.skipped = 0
        self.first_at: int | None = None

    def load_marks(self) -> None:
        """Read the store's marks (inside the write lock: another writer may have admitted)."""
        self.m.last_seq, store_at, self.m.last_tick_at = read_marks(self.conn)
        self.m.last_at = max(self.m.last_at, store_at)

    def fill(self, batch: int) -> bool:
        """Pull rows into ``pending`` (with seq) until the batch is full; False at the end."""
        m = self.m
        seq = m.last_seq + len(self.pending)
        last_at = m.last_at
        fresh = m.last_tick_at is None and m.last_seq == 0
        next_tick = _next_tick(m.last_tick_at, last_at) if self.synth_ticks and not fresh else -1
        for r in self.stream:
            if self.validate:
                check_values(r)
            at = r[0]
            if at < last_at:
                raise RowError(
                    "at", f"{at} is before the previous row's or the store's last at {last_at}"
                )
            if self.synth_ticks:
                if r[1] == "tick":
                    self.skipped += 1
                    continue
                if next_tick < 0:
                    next_tick = (at // MINUTE_MS + 1) * MINUTE_MS
                elif at >= next_tick:
                    for t in _ticks_between(next_tick - MINUTE_MS, last_at, at):
                        seq += 1
                        self.pending.append((seq, *tick_row(t)))
                        self.ticks += 1
                        m.last_tick_at = t
                    next_tick = (at // MINUTE_MS + 1) * MINUTE_MS
            elif r[1] == "tick":
                m.last_tick_at = at
            if self.first_at is None:
                self.first_at = at
            last_at = at
            seq += 1
            self.pending.append((seq, *r))
            self.admitted += 1
            if len(self.pending) >= batch:
                m.last_at = last_at
                return True
        m.last_at = last_at
        return False


class Committer:
    """Admits rows into one store connection (the single committer of this process).

    ``admit`` is synchronous; :class:`engine.journal.queue.JournalWriter`
    wraps it with the bounded, dropping queue for writers that must not block.
    """

    def __init__(
        self, conn: sqlite3.Connection, *, clock: Clock = wall_clock_ms, ticks: bool = True
    ) -> None:
        self.conn = conn
        self.clock = clock
        self.ticks = ticks

    # -- live admission ---------------------------------------------------

    def prepare(self, rows: Iterable[object]) -> tuple[list[InsertRow], list[Refusal]]:
        """Check offered rows (JSON-like mappings or insert tuples); split good from refused."""
        good: list[InsertRow] = []
        refused: list[Refusal] = []
        for i, row in enumerate(rows):
            try:
                if isinstance(row, tuple):
                    values: InsertRow = (0, *row[1:]) if len(row) == 15 else row
                    check_values(values)
                else:
                    values = row_from_mapping(row, with_at=False)
                if values[1] == "tick":
                    raise RowError("kind", "tick rows are written by the committer only")
            except RowError as exc:
                refused.append(Refusal(i, exc.field, exc.problem))
                continue
            good.append(values)
        return good, refused

    def admit(self, rows: Iterable[object] = (), *, dropped: int = 0) -> AdmitResult:
        """Check ``rows`` and admit the good ones now, in one transaction.

        Refused rows are counted (and returned); ``dropped`` (rows a queue could
        not take) is added to the persisted drop counter in the same
        transaction.
        """
        good, refused = self.prepare(rows)
        return self.commit_checked(
            good, refused_count=len(refused), dropped=dropped, refusals=refused
        )

    def commit_checked(
        self,
        good: list[InsertRow],
        *,
        refused_count: int = 0,
        dropped: int = 0,
        refusals: list[Refusal] | None = None,
    ) -> AdmitResult:
        """Admit already-checked insert tuples now (their ``at`` is replaced)."""
        conn = self.conn
        with immediate(conn):
            last_seq, last_at, last_tick_at = read_marks(conn)
            now = max(last_at, self.clock())
            ticks = _ticks_between(last_tick_at, last_at, now) if self.ticks else []
            if last_seq == 0 and last_tick_at is None:
                ticks = []  # an empty store: the first admission starts journal time
            seq = last_seq
            if ticks:
                insert_rows(conn, [(seq + 1 + i, *tick_row(t)) for i, t in enumerate(ticks)])
                seq += len(ticks)
            first = seq + 1
            if good:
                insert_rows(conn, [(first + i, now, *r[1:]) for i, r in enumerate(good)])
                seq += len(good)
            new_tick = ticks[-1] if ticks else last_tick_at
            if new_tick is None and self.ticks and seq:
                new_tick = (now // MINUTE_MS) * MINUTE_MS
            marks = [("last_seq", seq), ("last_at", now)]
            if new_tick is not None:
                marks.append(("last_tick_at", new_tick))
            _set_counters(conn, marks)
            if refused_count:
                conn.execute(_ADD_SQL, ("refused", refused_count))
            if dropped:
                conn.execute(_ADD_SQL, ("dropped", dropped))
        return AdmitResult(
            admitted=len(good),
            ticks=len(ticks),
            refused=tuple(refusals or ()),
            first_seq=first if good else 0,
            last_seq=seq if good else 0,
            at=now,
        )

    # -- history import ---------------------------------------------------

    def import_history(
        self,
        rows: Iterable[InsertRow],
        *,
        atomic: bool = True,
        synth_ticks: bool = False,
        validate: bool = True,
        batch: int = HISTORY_BATCH,
        on_batch: Callable[[int], None] | None = None,
    ) -> ImportResult:
        """Admit rows that carry their own ``at`` (non-decreasing, >= the store's last ``at``).

        ``atomic``: one transaction for everything (a bad row admits nothing;
        other writers wait for the lock meanwhile). Otherwise each ``batch`` rows
        commit on their own (the simulator, so readers see progress).
        ``synth_ticks``: add a tick at every minute boundary between rows and
        skip tick rows of the input; otherwise input ticks are kept as given.
        A refusal raises :class:`RowError` (the caller knows which line it was).
        """
        run = _HistoryImport(self, iter(rows), synth_ticks=synth_ticks, validate=validate)
        first_seq = 0
        done = False
        while not done:
            with immediate(self.conn):
                run.load_marks()
                first_seq = first_seq or run.m.last_seq + 1
                done = self._admit_history(run, batch, atomic=atomic)
            if on_batch is not None:
                on_batch(run.admitted + run.ticks)
        stored = run.admitted + run.ticks
        return ImportResult(
            admitted=run.admitted,
            ticks=run.ticks,
            skipped_ticks=run.skipped,
            first_seq=first_seq if stored else 0,
            last_seq=run.m.last_seq if stored else 0,
            first_at=run.first_at or 0,
            last_at=run.m.last_at,
        )

    def _admit_history(self, run: _HistoryImport, batch: int, *, atomic: bool) -> bool:
        """Insert ``run``'s rows a batch at a time, in the caller's transaction, and set the marks.

        Atomic: every row; otherwise one batch. Returns whether the input is done.
        """
        while True:
            more = run.fill(batch)
            if run.pending:
                insert_rows(self.conn, run.pending)
                run.m.last_seq = run.pending[-1][0]
                run.pending.clear()
            if not more or not atomic:
                self._set_marks(run.m)
                return not more

    def _set_marks(self, m: _Marks) -> None:
        marks = [("last_seq", m.last_seq), ("last_at", m.last_at)]
        if m.last_tick_at is not None:
            marks.append(("last_tick_at", m.last_tick_at))
        _set_counters(self.conn, marks)


def _next_tick(last_tick_at: int | None, last_at: int) -> int:
    """The next minute boundary to tick: after the last tick, and never before ``last_at``.

    The second bound matters when rows without ticks (an import) moved journal
    time past the last tick: ticking the skipped minutes would put ``at`` back.
    """
    base = last_tick_at if last_tick_at is not None else (last_at // MINUTE_MS) * MINUTE_MS
    return max((base // MINUTE_MS + 1) * MINUTE_MS, -(-last_at // MINUTE_MS) * MINUTE_MS)


def iter_jsonl_history(
    lines: Iterable[str], file: str, where: list[int], *, max_at: int | None = None
) -> Iterator[InsertRow]:
    """Parse JSON lines (history rows with ``at``); ``where[0]`` tracks the current line.

    A refusal raised while the consumer handles a row (ordering) belongs to
    ``where[0]``, because rows are consumed one at a time. ``max_at`` (wall
    clock plus :data:`FUTURE_SKEW_MS`) refuses rows from the future: one such
    row would make every later admission inherit its ``at`` (journal time never
    goes back) and retention would then prune every real row as "old".
    """

    for lineno, line in enumerate(lines, start=1):
        where[0] = lineno
        if not line.strip():
            continue
        row = parse_json_row(line, file, lineno, with_at=True)
        if max_at is not None and row[0] > max_at:
            raise RowError(
                "at",
                f"{row[0]} ({iso_ms(row[0])}) is in the future: more than "
                f"{FUTURE_SKEW_MS // 60_000} minutes after the wall clock",
            ).at_line(file, lineno)
        yield row


def parse_json_row(line: str, file: str, lineno: int, *, with_at: bool) -> InsertRow:
    """One JSON line -> a checked insert tuple, or a RowError located at ``file:lineno``."""
    from engine.jsontext import JsonTextError, loads

    if len(line) - line.endswith("\n") > MAX_LINE_CHARS:
        raise RowError("row", "line longer than 64 KiB").at_line(file, lineno)
    try:
        obj = loads(line)
    except JsonTextError as exc:
        where = f" (column {exc.col})" if exc.col else ""
        raise RowError("row", f"{exc.message}{where}").at_line(file, lineno) from None
    try:
        return row_from_mapping(obj, with_at=with_at)
    except RowError as exc:
        raise exc.at_line(file, lineno) from None
