"""The one evaluator: live evaluation, backtest and tests all run rows through it.

Seed 004's central claim is that a rule's result for a row is a pure function
of that row and the stored history before it, so a backtest reproduces live
fires exactly. This module makes that structural: :class:`RowEvaluator` takes
rows in seq order, with ``now`` = the row's ``at`` (there is no wall clock
here), a primitive host that has seen exactly the rows up to this one, and a
:class:`~engine.rules.evaluation.hooks.FireHooks`. :class:`LiveEvaluator` drives it
from the persisted cursor and commits fires with the cursor in one
transaction; :mod:`engine.rules.evaluation.backtest` drives it over a range of stored
rows with fresh state and writes nothing.

A rule whose evaluation errors or exceeds its budget is disabled alone, with
the error recorded; every other rule keeps running. A primitive that cannot
read the store (only possible with the SQL host) marks that row as a
``store_error`` instead: the store, not the rule, failed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.rules.evaluation.fires import Fire, insert_fires
from engine.rules.evaluation.hooks import DefaultHooks, FireHooks
from engine.rules.evaluation.schema import LIVE_CURSOR
from engine.rules.evaluation.window import COL, COLUMNS, ROW_SELECT, WindowIndex, plan_rule
from engine.rules.language.gates import Gate, GateCheck, gate_record, make_check
from engine.rules.language.model import CompiledRule, EvalResult, Rule
from engine.rules.language.prefilter import for_rule
from engine.store.txn import immediate

ACTIVE = "active"
DISABLED = "disabled"


class EvalHost(Protocol):
    """A primitive host the evaluator can advance row by row."""

    def feed(self, row: Sequence[Any]) -> None: ...

    def take_store_error(self) -> str | None: ...

    def count(self, selector: Mapping[str, str], window_ms: int) -> int: ...

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int: ...

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool: ...


class FastHost(WindowIndex):
    """The window index with the :class:`EvalHost` extras (it never reads the store)."""

    def take_store_error(self) -> str | None:
        return None


@dataclass(frozen=True, slots=True)
class StoreErrorRecord:
    """A row where a primitive failed to read the store: excluded from equivalence."""

    seq: int
    at: int
    rule: str
    error: str


@dataclass(frozen=True, slots=True)
class RuleError:
    """A rule disabled by its own evaluation (runtime error or budget)."""

    rule: str
    hash: str
    seq: int
    at: int
    error: str


@dataclass(slots=True)
class _Entry:
    compiled: CompiledRule
    rule: Rule
    guards: tuple[tuple[int, frozenset[str]], ...]
    target_col: int
    # The first guard unpacked (column -1 = none): most rules have at most one
    # guard besides ``type``, and checking it inline beats a generator per row.
    guard_col: int = -1
    guard_vals: frozenset[str] = frozenset()
    # ``event.F != "lit"`` conjuncts: (column, values that make the rule false).
    exclusions: tuple[tuple[int, frozenset[str]], ...] = ()
    # Aggregate thresholds tested before CEL (see engine.rules.language.gates).
    gates: tuple[GateCheck, ...] = ()
    # Set when the guards and gates are the whole condition: they decide the rule, and
    # a row passing them matches with these gates' calls (no CEL needed).
    decided: tuple[Gate, ...] | None = None


def row_view(row: Sequence[Any]) -> dict[str, object]:
    """A row tuple as the pinned column names, absent values as None (what CEL and policies see)."""
    return {
        name: (None if value == "" else value) for name, value in zip(COLUMNS, row, strict=True)
    }


def fast_host_for(rules: Iterable[CompiledRule]) -> FastHost:
    """A window index holding exactly the shapes these rules' primitives ask for."""
    shapes = [shape for cr in rules for shape in plan_rule(cr.rule).shapes]
    return FastHost(shapes)


@dataclass
class RowEvaluator:
    """Feeds rows (tuples in :data:`.window.COLUMNS` order) and yields fires.

    ``disabled`` maps rule names to the error that disabled them; it starts
    with whatever the caller restored and grows as rules fail. Rules are
    dispatched by (kind, type) with their static guards applied first, so a
    row no rule can match costs a dict lookup; then a rule's exclusions and
    aggregate gates (:mod:`engine.rules.language.gates`) are tested on the row tuple,
    and a rule they prove false costs no CEL activation. ``evaluations``
    counts the rules decided past that point (by CEL, or by their guards and
    gates alone when those are the whole condition).
    """

    rules: Sequence[CompiledRule]
    host: EvalHost
    hooks: FireHooks = field(default_factory=DefaultHooks)
    disabled: dict[str, str] = field(default_factory=dict)
    evaluations: int = 0
    rows_evaluated: int = 0
    rule_errors: list[RuleError] = field(default_factory=list)
    store_errors: list[StoreErrorRecord] = field(default_factory=list)
    conn: sqlite3.Connection | None = None
    #: Test each rule's aggregate gates before CEL (False only to prove they change nothing).
    use_gates: bool = True

    def __post_init__(self) -> None:
        self._by_kind: dict[str, list[tuple[_Entry, frozenset[str] | None]]] = {}
        for cr in self.rules:
            # The prefilter is the one statement of which rows a rule can match:
            # the backtest reads only those rows, and here the rest are skipped
            # before any CEL activation is built.
            prefilter = for_rule(cr)
            type_guard = prefilter.get("type")
            guards = [(COL[name], vals) for name, vals in prefilter.conditions if name != "type"]
            target_col = COL.get(cr.rule.target, -1)
            entry = _Entry(cr, cr.rule, tuple(guards[1:]), target_col)
            entry.exclusions = tuple((COL[name], vals) for name, vals in prefilter.exclusions)
            if guards:
                entry.guard_col, entry.guard_vals = guards[0]
            if self.use_gates:
                entry.gates = tuple(make_check(g, COL, self.host) for g in prefilter.gates)
                # Only a loader-compiled rule: its runner is the CEL program the
                # prefilter was derived from, within its cost limit.
                if prefilter.complete and cr.prefilter is prefilter:
                    entry.decided = prefilter.gates
            self._by_kind.setdefault(cr.rule.on, []).append((entry, type_guard))
        self._dispatch: dict[tuple[str, str], list[_Entry]] = {}
        self._row_kinds = self.hooks.row_kinds
        self._due: Callable[[], bool] = getattr(self.hooks, "due", _always)

    def _entries(self, kind: str, type_: str) -> list[_Entry]:
        key = (kind, type_)
        found = self._dispatch.get(key)
        if found is None:
            found = [
                e
                for e, tg in self._by_kind.get(kind, ())
                if (tg is None or type_ in tg) and e.rule.name not in self.disabled
            ]
            self._dispatch[key] = found
        return found

    def disable(self, name: str, error: str) -> None:
        self.disabled[name] = error
        self._dispatch.clear()

    def process(self, row: Sequence[Any]) -> list[Fire]:
        """Feed one row and evaluate the rules on its kind; return the fires (not stored)."""
        host = self.host
        host.feed(row)
        kind = row[2]
        row_kinds = self._row_kinds
        view: dict[str, object] | None = None
        if (row_kinds is None or kind in row_kinds) and self._due():
            view = row_view(row)
            self.hooks.on_row(view, self.conn)
        entries = self._entries(kind, row[3])
        if not entries:
            return []
        fires: list[Fire] = []
        seq, now = row[0], row[1]
        evaluations = self.evaluations
        for entry in entries:
            if entry.guard_col >= 0 and row[entry.guard_col] not in entry.guard_vals:
                continue
            if entry.guards and not all(row[c] in vals for c, vals in entry.guards):
                continue
            if entry.exclusions and any(row[c] in vals for c, vals in entry.exclusions):
                continue
            if entry.gates:
                try:
                    for check in entry.gates:
                        if not check(row, host):
                            break
                    else:
                        check = None
                except _UNANSWERED:
                    # The host cannot answer (a selector the window index refuses, a store
                    # read error): CEL meets the same failure and records it as it always
                    # did; a store error seen here is dropped so no later rule is blamed.
                    host.take_store_error()
                    check = None
                if check is not None:
                    continue  # a gate failed: the rule is false on this row
            if view is None:
                view = row_view(row)
            self.evaluations += 1
            result = _decide(entry, row, host) if entry.decided is not None else None
            if result is None:
                result = entry.compiled.evaluate(view, now, host)
            if result.error is not None:
                store_error = host.take_store_error()
                if store_error is not None:
                    self.store_errors.append(
                        StoreErrorRecord(seq, now, entry.rule.name, store_error)
                    )
                    continue
                self.rule_errors.append(
                    RuleError(entry.rule.name, entry.rule.hash, seq, now, result.error)
                )
                self.disable(entry.rule.name, result.error)
                continue
            if not result.matched:
                continue
            rule = entry.rule
            raw_target = None if entry.target_col < 0 else row[entry.target_col]
            target = "" if raw_target is None else str(raw_target)
            decision = self.hooks.on_match(rule, target, view, now)
            fires.append(
                Fire(
                    rule=rule.name,
                    hash=rule.hash,
                    seq=seq,
                    at=now,
                    target=target,
                    level=rule.level,
                    effective_level=decision.effective_level,
                    status=decision.status,
                    reasons=decision.reasons,
                    calls=result.calls,
                    cost=result.cost,
                )
            )
        if self.evaluations != evaluations:
            self.rows_evaluated += 1
        return fires


def _always() -> bool:
    """``due`` of hooks that do not say: every row of their kinds is due."""
    return True


#: What a gate's host call may raise instead of answering (see ``process``).
_UNANSWERED = (LookupError, RuntimeError, ValueError, TypeError)

#: Tuple positions of the string columns (CEL reads them as strings) and of ``n``.
_STRING_COLS = tuple(i for i, name in enumerate(COLUMNS) if name not in ("seq", "at", "n"))
_N_COL = COL["n"]


def _decide(entry: _Entry, row: Sequence[Any], host: EvalHost) -> EvalResult | None:
    """The match of a rule its guards and gates decide (they all passed), or None for CEL.

    The result is what the CEL program returns when every conjunct holds: a
    match whose calls are the gates' calls in source order (CEL evaluates them
    all, left to right) and whose cost is the rule's static cost (its base
    cost plus one primitive charge per call). A row whose values CEL would
    refuse (a non-string in a string column, a non-integer ``n``) goes to CEL,
    which reports it; so does any host failure.
    """
    for i in _STRING_COLS:
        if type(row[i]) is not str:
            return None
    n = row[_N_COL]
    if n is not None and type(n) is not int:
        return None
    gates = entry.decided or ()
    try:
        calls = tuple(gate_record(g, row, COL, host) for g in gates)
    except _UNANSWERED:
        host.take_store_error()
        return None
    return EvalResult(True, calls, entry.rule.static_cost, None)


# -- live evaluation -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepResult:
    """One committed batch: rows evaluated, fires stored (with ids), where the cursor is."""

    rows: int
    fires: tuple[Fire, ...]
    cursor: int
    rule_errors: tuple[RuleError, ...] = ()
    store_errors: tuple[StoreErrorRecord, ...] = ()


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
        if self._core is None:
            self._core = self._restore()
        core = self._core
        conn = self.conn
        limit = max_rows or self.batch_size
        try:
            with immediate(conn):
                rows = conn.execute(
                    ROW_SELECT + " WHERE seq > ? ORDER BY seq LIMIT ?", (self.cursor, limit)
                ).fetchall()
                if not rows:
                    return StepResult(0, (), self.cursor)
                errors_before = len(core.rule_errors)
                store_before = len(core.store_errors)
                evals_before = core.evaluations
                fires: list[Fire] = []
                for row in rows:
                    fires.extend(core.process(row))
                stored = insert_fires(conn, fires)
                new_errors = tuple(core.rule_errors[errors_before:])
                new_store = tuple(core.store_errors[store_before:])
                for err in new_errors:
                    conn.execute(
                        "INSERT INTO rule_state (name, hash, state, error, error_seq, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                        " hash = excluded.hash, state = excluded.state, error = excluded.error,"
                        " error_seq = excluded.error_seq, updated_at = excluded.updated_at",
                        (err.rule, err.hash, DISABLED, err.error, err.seq, err.at),
                    )
                for se in new_store:
                    conn.execute(
                        "INSERT INTO rule_store_errors (seq, rule, error, at) VALUES (?, ?, ?, ?)",
                        (se.seq, se.rule, se.error, se.at),
                    )
                _bump(
                    conn,
                    {
                        "rows": len(rows),
                        "evaluations": core.evaluations - evals_before,
                        "fires": len(stored),
                        "rule_errors": len(new_errors),
                        "store_errors": len(new_store),
                    },
                )
                self.hooks.before_commit(stored, conn)
                last = rows[-1]
                conn.execute(
                    "INSERT INTO rule_cursor (name, seq, at) VALUES (?, ?, ?) ON CONFLICT(name)"
                    " DO UPDATE SET seq = excluded.seq, at = excluded.at",
                    (self.cursor_name, last[0], last[1]),
                )
        except BaseException:
            # In-memory state ran ahead of the store: rebuild it from the store next time.
            self._core = None
            raise
        self.cursor = int(last[0])
        if self.acting and stored:
            self.hooks.after_commit(stored)
        return StepResult(len(rows), tuple(stored), self.cursor, new_errors, new_store)

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
