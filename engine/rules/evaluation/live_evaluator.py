"""Live evaluation: committed rows from the persisted cursor, fires committed with the cursor.

Why a module of its own: the evaluator (:mod:`.evaluator`) decides rows; this
drives it against a store that other writers share. Each :meth:`LiveEvaluator.step`
commits one batch (its fires, the rules its rows disabled, store errors,
counters and the advanced cursor) in a single ``BEGIN IMMEDIATE``
transaction, so a crash leaves all of a batch or none of it.

The batch is *evaluated* before that transaction: serve's journal writer and
the evaluator share one write lock, and evaluating ~200 rows in Python while
holding it made every journal commit wait for the evaluator (2.8 ms a batch
under OTLP load). Evaluating first is safe because everything a match reads is
fixed once committed (journal rows below the batch's end, the window host, the
lifecycle's own state) except the active holds, and the only other writer of
holds releases them, which commutes with what the batch writes. The
transaction then checks that no other evaluator advanced the cursor meanwhile
(if one did, this evaluator's state is stale and is rebuilt from the store).
A batch holding a row the hooks write on (``row_kinds``: live, a tick
re-evaluates stored holds and releases them) is evaluated inside the
transaction as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.evaluation.evaluator import (
    EvalHost,
    RowEvaluator,
    RuleError,
    StoreErrorRecord,
    fast_host_for,
)
from engine.rules.evaluation.fires import Fire, insert_fires
from engine.rules.evaluation.hooks import DefaultHooks, FireHooks
from engine.rules.evaluation.rows_json import ROWS_JSON, decoded
from engine.rules.evaluation.schema import LIVE_CURSOR
from engine.rules.evaluation.window import COL, ROW_SELECT, WindowIndex
from engine.rules.language.model import CompiledRule
from engine.store.txn import immediate
from engine.vocab import DISABLED

#: ``rule_state.state`` of a rule being evaluated (``DISABLED`` once its evaluation failed).
ACTIVE = "active"

_KIND = COL["kind"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One committed batch: rows evaluated, fires stored (with ids), where the cursor is."""

    rows: int
    fires: tuple[Fire, ...]
    cursor: int
    rule_errors: tuple[RuleError, ...] = ()
    store_errors: tuple[StoreErrorRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch evaluated but not yet written: what its transaction must store."""

    rows: Sequence[Sequence[Any]]
    fires: tuple[Fire, ...]
    rule_errors: tuple[RuleError, ...]
    store_errors: tuple[StoreErrorRecord, ...]
    evaluations: int


class CursorMoved(Exception):
    """Another evaluator committed past this one's cursor: its in-memory state is stale."""


#: A batch as one JSON array, with its row count (see :mod:`.rows_json`).
_BATCH_JSON = (
    f"SELECT count(*), {ROWS_JSON} FROM"
    " (SELECT * FROM rule_journal WHERE seq > ? ORDER BY seq LIMIT ?)"
)


def read_batch(conn: sqlite3.Connection, after: int, limit: int) -> list[tuple[Any, ...]]:
    """The next ``limit`` rows after seq ``after`` (``ROW_SELECT``'s tuples), read in one step.

    Why not ``fetchall`` (:mod:`.rows_json`): in serve the evaluator reads each
    batch while request threads map records, and a batch of 200 rows was 200
    waits for them (strace of serve under OTLP load: 25,000 futex calls for
    30,000 records, 18,000 this way; alone, 9.5 against 6.3 µs a row
    evaluated). A batch JSON cannot carry exactly, or an SQLite without JSON,
    is read row by row as before, with the same values and errors.
    """
    try:
        count, blob = conn.execute(_BATCH_JSON, (after, limit)).fetchone()
    except sqlite3.OperationalError:
        pass  # no JSON functions here (or a store error, which the next read meets too)
    else:
        rows = decoded(blob, count)
        if rows is not None:
            return rows
    return conn.execute(
        ROW_SELECT + " WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
    ).fetchall()


def read_cursor(conn: sqlite3.Connection, name: str = LIVE_CURSOR) -> tuple[int, int]:
    row = conn.execute("SELECT seq, at FROM rule_cursor WHERE name = ?", (name,)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _bump(conn: sqlite3.Connection, counters: Mapping[str, int]) -> None:
    for name, value in counters.items():
        if value:
            conn.execute(
                "INSERT INTO rule_counters (name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                (name, value),
            )


class LiveEvaluator:
    """Evaluates committed journal rows from the persisted cursor onwards.

    Each :meth:`step` commits one batch: the fires, the disabled rules'
    errors, store errors, counters and the advanced cursor in a single
    ``BEGIN IMMEDIATE`` transaction, so a crash leaves either all of a batch
    or none of it. ``acting=False`` (a follower) evaluates and records but
    never calls ``after_commit``, where actions run.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        rules: Sequence[CompiledRule],
        *,
        hooks: FireHooks | None = None,
        acting: bool = True,
        cursor_name: str = LIVE_CURSOR,
        batch_size: int = 500,
        host_factory: Callable[[Sequence[CompiledRule]], EvalHost] | None = None,
    ) -> None:
        self.conn = conn
        self.rules = tuple(rules)
        self.hooks = hooks or DefaultHooks()
        self.acting = acting
        self.cursor_name = cursor_name
        self.batch_size = batch_size
        self._host_factory = host_factory or fast_host_for
        self._core: RowEvaluator | None = None
        self.cursor = 0

    # -- state ------------------------------------------------------------------------

    def _restore(self) -> RowEvaluator:
        """Rebuild in-memory state from the store: cursor, disabled rules, warm window."""
        conn = self.conn
        self.cursor, cursor_at = read_cursor(conn, self.cursor_name)
        hashes = {cr.rule.name: cr.rule.hash for cr in self.rules}
        disabled = {}
        for name, hash_, state, error in conn.execute(
            "SELECT name, hash, state, error FROM rule_state"
        ):
            if state == DISABLED and hashes.get(name) == hash_:
                disabled[name] = error or "disabled"
        host = self._host_factory(self.rules)
        core = RowEvaluator(self.rules, host, self.hooks, disabled, conn=conn)
        max_window = max((p.window_ms for cr in self.rules for p in cr.rule.primitives), default=0)
        if self.cursor and max_window and isinstance(host, WindowIndex):
            warm = conn.execute(
                ROW_SELECT + " WHERE seq <= ? AND at > ? ORDER BY seq",
                (self.cursor, cursor_at - max_window),
            )
            for row in warm:
                host.feed(row)
        self._register_versions()
        return core

    def _register_versions(self) -> None:
        """Remember each loaded rule version (text by hash) for explain and the lifecycle."""
        cursor, cursor_at = read_cursor(self.conn, self.cursor_name)
        with immediate(self.conn):
            for cr in self.rules:
                r = cr.rule
                self.conn.execute(
                    "INSERT OR IGNORE INTO rule_versions (hash, name, source_file, source_kind,"
                    " text, first_seen_seq, first_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (r.hash, r.name, r.source_file, r.source_kind, r.text, cursor, cursor_at),
                )
                self.conn.execute(
                    "INSERT INTO rule_state (name, hash, state, error, error_seq, updated_at)"
                    " VALUES (?, ?, ?, NULL, NULL, ?) ON CONFLICT(name) DO UPDATE SET"
                    " hash = excluded.hash, state = excluded.state, error = NULL,"
                    " error_seq = NULL, updated_at = excluded.updated_at"
                    " WHERE rule_state.hash != excluded.hash",
                    (r.name, r.hash, ACTIVE, cursor_at),
                )

    @property
    def disabled(self) -> Mapping[str, str]:
        return {} if self._core is None else dict(self._core.disabled)

    # -- stepping -----------------------------------------------------------------------

    def step(self, max_rows: int | None = None) -> StepResult:
        """Evaluate and commit the next batch of committed rows (possibly none)."""
        while True:
            try:
                return self._step(max_rows)
            except CursorMoved:
                continue  # another evaluator stored past our cursor: again, from the store

    def _step(self, max_rows: int | None) -> StepResult:
        if self._core is None:
            self._core = self._restore()
        core = self._core
        conn = self.conn
        try:
            rows = read_batch(conn, self.cursor, max_rows or self.batch_size)
            if not rows:
                return StepResult(0, (), self.cursor)
            if self._writes_on(rows):
                with immediate(conn):
                    self._check_cursor()
                    batch = _evaluate(core, rows)
                    stored = self._write(batch)
            else:
                batch = _evaluate(core, rows)
                with immediate(conn):
                    self._check_cursor()
                    stored = self._write(batch)
        except BaseException:
            # In-memory state ran ahead of the store: rebuild it from the store next time.
            self._core = None
            raise
        self.cursor = int(rows[-1][0])
        if self.acting and stored:
            self.hooks.after_commit(stored)
        return StepResult(
            len(rows), tuple(stored), self.cursor, batch.rule_errors, batch.store_errors
        )

    def _writes_on(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Whether the hooks write while these rows are evaluated (they want one of them)."""
        kinds = self.hooks.row_kinds
        return kinds is None or any(row[_KIND] in kinds for row in rows)

    def _check_cursor(self) -> None:
        if read_cursor(self.conn, self.cursor_name)[0] != self.cursor:
            raise CursorMoved(self.cursor_name)

    def _write(self, batch: _Batch) -> list[Fire]:
        """Store an evaluated batch and advance the cursor (inside the caller's transaction)."""
        conn = self.conn
        stored = insert_fires(conn, batch.fires)
        for err in batch.rule_errors:
            conn.execute(
                "INSERT INTO rule_state (name, hash, state, error, error_seq, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                " hash = excluded.hash, state = excluded.state, error = excluded.error,"
                " error_seq = excluded.error_seq, updated_at = excluded.updated_at",
                (err.rule, err.hash, DISABLED, err.error, err.seq, err.at),
            )
        for se in batch.store_errors:
            conn.execute(
                "INSERT INTO rule_store_errors (seq, rule, error, at) VALUES (?, ?, ?, ?)",
                (se.seq, se.rule, se.error, se.at),
            )
        _bump(
            conn,
            {
                "rows": len(batch.rows),
                "evaluations": batch.evaluations,
                "fires": len(stored),
                "rule_errors": len(batch.rule_errors),
                "store_errors": len(batch.store_errors),
            },
        )
        self.hooks.before_commit(stored, conn)
        last = batch.rows[-1]
        conn.execute(
            "INSERT INTO rule_cursor (name, seq, at) VALUES (?, ?, ?) ON CONFLICT(name)"
            " DO UPDATE SET seq = excluded.seq, at = excluded.at",
            (self.cursor_name, last[0], last[1]),
        )
        return stored

    def run_until_idle(self, max_rows: int | None = None) -> list[Fire]:
        """Step until no committed row is left; return every fire stored."""
        out: list[Fire] = []
        while True:
            res = self.step(max_rows)
            out.extend(res.fires)
            if res.rows == 0:
                return out

    def follow(
        self,
        stop: threading.Event,
        *,
        poll_s: float = 0.02,
        on_step: Callable[[StepResult], None] | None = None,
    ) -> None:
        """Evaluate new rows as they commit until ``stop`` is set (sleeping when idle)."""
        while not stop.is_set():
            res = self.step()
            if on_step is not None and res.rows:
                on_step(res)
            if res.rows == 0:
                stop.wait(poll_s)
        return None


def _evaluate(core: RowEvaluator, rows: Sequence[Sequence[Any]]) -> _Batch:
    """Run a batch's rows through the evaluator; what it found, not yet stored."""
    errors_before = len(core.rule_errors)
    store_before = len(core.store_errors)
    evals_before = core.evaluations
    fires: list[Fire] = []
    for row in rows:
        fires.extend(core.process(row))
    return _Batch(
        rows,
        tuple(fires),
        tuple(core.rule_errors[errors_before:]),
        tuple(core.store_errors[store_before:]),
        core.evaluations - evals_before,
    )
