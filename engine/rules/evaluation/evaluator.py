"""The one evaluator: live evaluation, backtest and tests all run rows through it.

Seed 004's central claim is that a rule's result for a row is a pure function
of that row and the stored history before it, so a backtest reproduces live
fires exactly. This module makes that structural: :class:`RowEvaluator` takes
rows in seq order, with ``now`` = the row's ``at`` (there is no wall clock
here), a primitive host that has seen exactly the rows up to this one, and a
:class:`~engine.rules.evaluation.hooks.FireHooks`. :mod:`.live_evaluator`'s ``LiveEvaluator`` drives
it from the persisted cursor and commits fires with the cursor in one
transaction; :mod:`engine.rules.evaluation.backtest` drives it over a range of stored
rows with fresh state and writes nothing.

A rule whose evaluation errors or exceeds its budget is disabled alone, with
the error recorded; every other rule keeps running. A primitive that cannot
read the store (only possible with the SQL host) marks that row as a
``store_error`` instead: the store, not the rule, failed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.rules.evaluation.fires import Fire
from engine.rules.evaluation.hooks import DefaultHooks, FireHooks
from engine.rules.evaluation.window import COL, COLUMNS, WindowIndex, plan_rule
from engine.rules.language.gates import Gate, GateCheck, gate_record, make_check
from engine.rules.language.model import CompiledRule, EvalResult, Rule
from engine.rules.language.prefilter import for_rule


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
