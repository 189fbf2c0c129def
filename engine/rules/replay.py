"""How a backtest answers each aggregate (fed window index or SQL on an index), and its gates.

Why: the window index answers a primitive in a microsecond but must be fed
every row its selector can match; for a selector with no literal ``type``
(``count({"harness": event.harness}, duration("5m"))``) that is every row of
the journal, so reading the journal would cost more than the rules. SQL on a
``(…, at)`` index answers the same question from the window alone, at the
price of a query per call. Which is cheaper depends on how many rows a feed
needs and how many calls the rules make, so :func:`plan_replay` estimates both
from index-only counts and picks per aggregate shape; and it moves a rule's
gate (:mod:`engine.rules.gates`) into the query that reads its candidate rows
when that is cheaper than reading the rows, so rows failing the threshold
never reach Python.

The choice changes the cost, never the result: :class:`ReplayHost` answers a
SQL-served shape with :class:`~engine.rules.host_sql.SqlHost`, whose semantics
a test holds equal to the window index's, and an SQL gate is exactly the
gate the evaluator tests (:mod:`engine.rules.aggsql`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.rules.aggsql import gate_predicate, index_keys, journal_indexes
from engine.rules.evaluator import FastHost
from engine.rules.host_sql import SqlHost
from engine.rules.model import KIND_NAMES, CompiledRule
from engine.rules.prefilter import Clause, Term, for_rule
from engine.rules.window import Shape, group_filters, plan_rule

ShapeKey = tuple[tuple[str, ...], str | None, int]
Mode = Literal["auto", "sql", "window"]

#: Cost units: one row SQLite visits in C. Reading a row into Python and
#: feeding it costs about eight; a query made from Python about twenty-five.
C_FEED = 8.0
C_CALL = 25.0
C_READ = 8.0
#: Index entries are counted without reading the table: about a quarter unit each.
C_ENTRY = 0.25
#: A row read through an index (entry, then table lookup) against one read in a pass.
SCAN_FACTOR = 4
#: Ranges longer than this (in seqs) are counted on slices (see ``_Stats._samples``).
SAMPLE_ABOVE = 400_000


class ReplayHost(FastHost):
    """The window index for fed shapes, :class:`SqlHost` for the shapes in ``sql_keys``.

    Those shapes are never fed (a replay reads none of their rows for them);
    each call is a query at the evaluated row's (seq, at). Answers are kept
    until the next row: the evaluator's gate and CEL often ask the same call
    on the same row.
    """

    def __init__(
        self, shapes: Iterable[Shape], sql_keys: frozenset[ShapeKey], conn: sqlite3.Connection
    ) -> None:
        self.sql_keys = sql_keys
        super().__init__(s for s in shapes if _key(s) not in sql_keys)
        self._sql = SqlHost(conn)
        self._answers: dict[tuple[Any, ...], int | bool] = {}
        self._answered_at = -1

    def take_store_error(self) -> str | None:
        return self._sql.take_store_error()

    def _ask(
        self, fn: str, field: str | None, selector: Mapping[str, str], window_ms: int
    ) -> int | bool | None:
        """The SQL answer when this shape is SQL-served (None: the window index answers)."""
        if (tuple(sorted(selector)), field, window_ms) not in self.sql_keys:
            return None
        if self._answered_at != self.seq:
            self._answers.clear()
            self._answered_at = self.seq
        key = (fn, field, tuple(sorted(selector.items())), window_ms)
        found = self._answers.get(key)
        if found is None:
            sql = self._sql
            sql.set_position(self.seq, self.now_ms)
            if fn == "count":
                found = sql.count(selector, window_ms)
            elif fn == "exists":
                found = sql.exists(selector, window_ms)
            else:
                found = sql.distinct(str(field), selector, window_ms)
            self._answers[key] = found
        return found

    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        found = self._ask("count", None, selector, window_ms)
        return super().count(selector, window_ms) if found is None else int(found)

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        found = self._ask("exists", None, selector, window_ms)
        return super().exists(selector, window_ms) if found is None else bool(found)

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        found = self._ask("distinct", field, selector, window_ms)
        return super().distinct(field, selector, window_ms) if found is None else int(found)


def _key(shape: Shape) -> ShapeKey:
    fld = shape.field if shape.fn == "distinct" else None
    return (tuple(sorted(shape.keys)), fld, shape.window_ms)


@dataclass(frozen=True)
class ReplayPlan:
    """Shapes answered by SQL, and per rule name the SQL gates its candidate term carries."""

    sql_shapes: frozenset[ShapeKey] = frozenset()
    gates: Mapping[str, tuple[Clause, ...]] = field(default_factory=dict)
    #: The rules' candidates are a large share of the range: read them in one pass.
    scan: bool = False
    #: The types the rules name, by estimated rows, most first (for that pass).
    order: tuple[str, ...] = ()

    def host(self, rules: Sequence[CompiledRule], conn: sqlite3.Connection) -> FastHost:
        shapes = [s for cr in rules for s in plan_rule(cr.rule).shapes]
        if not self.sql_shapes:
            return FastHost(shapes)
        return ReplayHost(shapes, self.sql_shapes, conn)


@dataclass
class _Stats:
    """Index-only figures about the replayed range, each read once when first needed."""

    conn: sqlite3.Connection
    first_seq: int
    last_seq: int
    rows: int
    span_ms: int
    _counts: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _distinct: dict[str, int] = field(default_factory=dict)

    def count(self, kinds: frozenset[str] | None, types: frozenset[str] | None) -> int:
        """Rows of the range with these kinds and types (``None``: any), from the index."""
        if kinds is None and types is None:
            return self.rows
        if kinds is None:
            # The (kind, type) index serves a seq range only under a kind: name them all.
            kinds = frozenset(KIND_NAMES)
        conds = tuple(
            (name, values) for name, values in (("kind", kinds), ("type", types)) if values
        )
        if any(values is not None and not values for values in (kinds, types)):
            return 0
        key = conds
        if key not in self._counts:
            where, params = Term(conds).sql()
            sql = f"SELECT count(*) FROM rule_journal WHERE seq BETWEEN ? AND ? AND {where}"
            total = 0.0
            for lo, hi, scale in self._samples():
                row = self.conn.execute(sql, (lo, hi, *params)).fetchone()
                total += int(row[0]) * scale
            self._counts[key] = int(total)
        return self._counts[key]

    def _samples(self) -> list[tuple[int, int, float]]:
        """Seq ranges to count in, with their weights: the whole range, or 8 spread slices.

        A count is only an estimate for the cost model, so on a long range an
        eighth of it, in slices spread over its length, is enough.
        """
        first, last = self.first_seq, self.last_seq
        span = last - first + 1
        if span <= SAMPLE_ABOVE:
            return [(first, last, 1.0)]
        width = span // 64
        step = span // 8
        return [(first + i * step, first + i * step + width - 1, step / width) for i in range(8)]

    def distinct(self, column: str, cap: int = 1000) -> int:
        """How many values ``column`` takes (walking an index that leads with it; capped)."""
        if column not in self._distinct:
            n, last = 0, None
            sql = f"SELECT {column} FROM rule_journal WHERE {column} > ? ORDER BY {column} LIMIT 1"
            first = f"SELECT {column} FROM rule_journal WHERE {column} IS NOT NULL"
            first += f" ORDER BY {column} LIMIT 1"
            row = self.conn.execute(first).fetchone()
            while row is not None and n < cap:
                n, last = n + 1, row[0]
                row = self.conn.execute(sql, (last,)).fetchone()
            self._distinct[column] = max(n, 1)
        return self._distinct[column]


def plan_replay(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    first_seq: int,
    last_seq: int,
    rows: int,
    span_ms: int,
    mode: Mode = "auto",
) -> ReplayPlan:
    """Choose, per aggregate shape and per gate, the cheaper way to replay seqs first..last.

    ``mode="window"`` feeds every shape and tests every gate in Python (the
    plain replay); ``"sql"`` serves every shape an index can serve by SQL and
    tests every gate it can in SQL (to exercise those paths); ``"auto"``
    compares estimated costs: a shape is served by SQL when the calls the
    rules would make (each candidate row of each rule that uses it, tested in
    SQL when the rule's gate on it can be) cost less than feeding its rows.
    """
    if mode == "window" or rows <= 0:
        return ReplayPlan()
    est = _Estimator(
        _Stats(conn, first_seq, last_seq, rows, max(span_ms, 1)), journal_indexes(conn)
    )
    planned = {cr.rule.name: plan_rule(cr.rule).shapes for cr in rules}
    groups = group_filters(s for shapes in planned.values() for s in shapes)
    uses = {name: {_key(s) for s in shapes} for name, shapes in planned.items()}
    gates = {cr.rule.name: for_rule(cr).gates for cr in rules}
    sql_gates = {g: gate_predicate(g, est.available) for gs in gates.values() for g in gs}
    cands = {cr.rule.name: _candidates(est.stats, cr) for cr in rules}
    sql_shapes: set[ShapeKey] = set()
    for key, filters in groups.items():
        if index_keys(key[0], est.available) is None:
            continue
        feed = _feed_rows(est.stats, filters)
        if mode == "sql":
            sql_shapes.add(key)
            continue
        if feed is None:
            continue
        calls = 0.0
        for name, used in uses.items():
            if key not in used:
                continue
            pushed = [g for g in gates[name] if g.shape_key == key and sql_gates[g] is not None]
            if pushed:
                per_row = min(est.gate_cost(key, filters, g.floor or 1) for g in pushed)
            else:
                per_row = C_CALL + est.window_rows(key, filters)
            calls += cands[name] * per_row
        if calls < feed * C_FEED:
            sql_shapes.add(key)
    chosen: dict[str, tuple[Clause, ...]] = {}
    for name, rule_gates in gates.items():
        clauses = []
        for gate in rule_gates:
            pred = sql_gates[gate]
            if pred is None:
                continue
            key = gate.shape_key
            filters = groups.get(key, ())
            if (
                mode == "sql"
                or key in sql_shapes
                or est.gate_cost(key, filters, gate.floor or 1) < C_READ
            ):
                clauses.append((pred[0], tuple(pred[1])))
        if clauses:
            chosen[name] = tuple(clauses)
    # Through an index, each candidate costs a table lookup (a few units); one
    # pass over the range costs about one unit per row. Feeds count as candidates.
    feeds = sum(_feed_rows(est.stats, f) or rows for k, f in groups.items() if k not in sql_shapes)
    scan = (sum(cands.values()) + feeds) * SCAN_FACTOR > rows
    weight: dict[str, float] = {}
    for cr in rules:
        types = for_rule(cr).get("type") or frozenset()
        for t in types:
            weight[t] = weight.get(t, 0.0) + cands[cr.rule.name] / len(types)
    order = tuple(sorted(weight, key=lambda t: (-weight[t], t)))
    return ReplayPlan(frozenset(sql_shapes), chosen, scan, order)


def _candidates(stats: _Stats, cr: CompiledRule) -> int:
    """Rows of the range a rule's kind and type conditions admit (an upper bound)."""
    pf = for_rule(cr)
    if pf.impossible:
        return 0
    kinds = frozenset({pf.kind}) & (pf.get("kind") or frozenset({pf.kind}))
    return stats.count(kinds, pf.get("type"))


def _feed_rows(stats: _Stats, filters: Sequence[tuple[str, frozenset[str]]]) -> int | None:
    """Rows a feed of this shape reads; None when it filters on columns no index counts."""
    by = dict(filters)
    if any(name not in ("kind", "type") for name in by):
        return None
    return stats.count(by.get("kind"), by.get("type"))


@dataclass
class _Estimator:
    """Cost estimates for one shape's window queries (units: rows SQLite visits)."""

    stats: _Stats
    available: frozenset[str]

    def window_rows(self, key: ShapeKey, filters: Iterable[tuple[str, frozenset[str]]]) -> float:
        """Rows one window holds for the values the shape's index seeks on."""
        by = dict(filters)
        seek = index_keys(key[0], self.available) or ()
        base = self.stats.count(by.get("kind"), by.get("type")) * key[2] / self.stats.span_ms
        if "harness" in seek:
            base /= self.stats.distinct("harness")
        if "type" in seek and "type" not in by:
            base /= self.stats.distinct("type")
        return base

    def gate_cost(
        self, key: ShapeKey, filters: Iterable[tuple[str, frozenset[str]]], floor: int
    ) -> float:
        """Testing one gate on one candidate row in SQL: a seek, index entries, table rows."""
        window = self.window_rows(key, filters)
        cost = 1 + C_ENTRY * min(float(floor), window)
        seek = set(index_keys(key[0], self.available) or ())
        if key[1] is not None or set(key[0]) - seek:
            cost += window  # table rows read to test the other keys (or distinct's field)
        return cost
