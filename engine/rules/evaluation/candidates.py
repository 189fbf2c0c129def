"""The journal rows a replay must read for a rule set, and the queries that read them.

Why: a backtest pays for the rows it reads into Python, so it reads only rows
some rule's prefilter admits (:mod:`engine.rules.language.prefilter`), rows the window
index must be fed, and rows of the kinds the fire hooks watch. Any other row
would be evaluated by no rule and counted by no fed aggregate.

A term may also carry SQL gates (:func:`engine.rules.evaluation.aggsql.gate_predicate`):
a rule's aggregate threshold tested by SQLite before the row is read, so the
rows on which the threshold fails (most of them) never reach Python.

Terms are read by index prefix: all terms on the same ``kind``/``type`` values
share one query (the OR of what else they need), so each stretch of the
``(kind, type)`` index is walked once however many rules look at it; the
queries are merged by seq.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.language.model import CompiledRule
from engine.rules.language.prefilter import Clause, Condition, Term, for_rule


@dataclass(frozen=True, slots=True)
class CandidatePlan:
    """The rows a backtest must read: a union of terms, or ``None`` for every row.

    ``terms`` is minimal (no term admits another) and never holds an
    impossible term (one with an empty value set).
    """

    terms: tuple[Term, ...] | None
    #: Read the candidates in one pass over the table instead of through the
    #: indexes: cheaper when they are a large share of it (see ``rows``).
    scan: bool = False
    #: Types by how many rows they hold, most first (the scan tests them in this order).
    order: tuple[str, ...] = ()
    #: Extra expressions (SQL, values) selected after the row's columns.
    columns: tuple[Clause, ...] = ()

    @property
    def everything(self) -> bool:
        return self.terms is None

    def queries(self) -> list[tuple[str, list[Any]]]:
        """One WHERE fragment per index prefix (and one for terms no index serves)."""
        groups: dict[tuple[Condition, ...], list[Term]] = {}
        for term in self.terms or ():
            groups.setdefault(term.prefix, []).append(term)
        out: list[tuple[str, list[Any]]] = []
        for prefix, members in groups.items():
            lead, params = Term(prefix).sql()
            rests = [m.residual_sql() for m in members]
            parts = [] if lead == "1" else [lead]
            if all(r != "1" for r, _ in rests):
                parts.append("(" + " OR ".join(f"({r})" for r, _ in rests) + ")")
                params = params + [v for _, vs in rests for v in vs]
            out.append((" AND ".join(parts) or "1", params))
        return out

    def scan_where(self) -> tuple[str, list[Any]]:
        """The whole union as one WHERE fragment for a pass over the table.

        Terms are grouped by ``type``: the commonest types first, each tested
        once (``type = ?`` then its terms), then one ``type IN (…)`` for all the
        rarer ones, so a row meets a few comparisons instead of every term in
        turn. The type tests nest, ``(type = a AND A) OR (type <> a AND (…))``,
        so a row of a common type whose terms fail stops after one more
        comparison instead of trying every other type (on the 45-day demo
        journal, 85% of rows are tool calls: a quarter of the conditions'
        cost). Terms that name no type follow, those naming one other column
        merged into one ``IN``. It stays an OR/AND chain on purpose: SQLite
        short-circuits those in a WHERE clause but evaluates both sides of an
        AND inside a ``CASE`` branch, which would run every gate's subquery.
        """
        by_type: dict[str, list[Term]] = {}
        rest: list[Term] = []
        for term in self.terms or ():
            types = dict(term.conditions).get("type")
            if types is None:
                rest.append(term)
            for value in types or ():
                by_type.setdefault(value, []).append(term)
        rank = {t: i for i, t in enumerate(self.order)}
        ordered = sorted(by_type, key=lambda t: (rank.get(t, len(rank)), t))

        def branch(value: str) -> tuple[str, list[Any]]:
            clause, values = _any_of(
                Term(tuple(c for c in m.conditions if c[0] != "type"), m.extra)
                for m in by_type[value]
            )
            return f"(type = ? AND ({clause}))", [value, *values]

        chain, params = "", []
        rare = ordered[COMMON_TYPES:]
        if rare:
            inner = [branch(value) for value in rare]
            marks = ", ".join("?" * len(rare))
            chain = f"(type IN ({marks}) AND ({' OR '.join(c for c, _ in inner)}))"
            params = [*rare, *(v for _, vs in inner for v in vs)]
        for value in reversed(ordered[:COMMON_TYPES]):
            clause, values = branch(value)
            if chain:
                chain = f"({clause} OR (type <> ? AND {chain}))"
                params = [*values, value, *params]
            else:
                chain, params = clause, values
        if rest:
            clause, values = _any_of(rest)
            chain = f"{chain} OR ({clause})" if chain else f"({clause})"
            params += values
        return chain or "0", params

    def rows(
        self, conn: sqlite3.Connection, select: str, bound: str, params: Sequence[Any]
    ) -> Generator[tuple[Any, ...], None, None]:
        """Rows matching ``bound`` (a WHERE fragment) and any term, in seq order, once each.

        Each row is ``select``'s columns followed by :attr:`columns`.
        """
        select, head_params = self.with_columns(select)
        params = (*head_params, *params)
        if self.terms is None:
            yield from conn.execute(f"{select} WHERE {bound} ORDER BY seq", tuple(params))
            return
        queries = self.queries()
        if len(queries) > 1 and self.one_pass:
            # One pass in seq order over the table (the rowid range of ``bound``):
            # reading most of it through an index costs a table lookup per row,
            # and a term no index serves has the table read anyway.
            clause, values = self.scan_where()
            sql = f"{select} NOT INDEXED WHERE {bound} AND ({clause}) ORDER BY seq"
            yield from conn.execute(sql, (*params, *values))
            return
        cursors = [
            conn.execute(f"{select} WHERE {bound} AND {clause} ORDER BY seq", (*params, *values))
            for clause, values in queries
        ]
        if len(cursors) == 1:
            yield from cursors[0]
            return
        last = None
        for row in heapq.merge(*cursors, key=_seq):
            if row[0] != last:
                last = row[0]
                yield row

    def with_columns(self, select: str) -> tuple[str, tuple[Any, ...]]:
        """``select`` with :attr:`columns` after its own, and their values (they come first)."""
        if not self.columns:
            return select, ()
        head, tail = select.split(" FROM ", 1)
        values = tuple(v for _, vs in self.columns for v in vs)
        return f"{head}, {', '.join(c for c, _ in self.columns)} FROM {tail}", values

    @property
    def one_pass(self) -> bool:
        """Whether :meth:`rows` reads in one pass over the table (see ``scan``)."""
        return self.scan or any(not term.indexed for term in self.terms or ())

    def count(self, conn: sqlite3.Connection, bound: str, params: Sequence[Any]) -> int:
        """How many rows :meth:`rows` yields for the same bound (for progress)."""
        if self.terms is None:
            sql = f"SELECT count(*) FROM rule_journal WHERE {bound}"
            return int(conn.execute(sql, tuple(params)).fetchone()[0])
        if self.one_pass:
            clause, values = self.scan_where()
            sql = f"SELECT count(*) FROM rule_journal NOT INDEXED WHERE {bound} AND ({clause})"
            return int(conn.execute(sql, (*params, *values)).fetchone()[0])
        queries = self.queries()
        if not queries:
            return 0
        parts = [f"SELECT seq FROM rule_journal WHERE {bound} AND {c}" for c, _ in queries]
        values = [v for _, vs in queries for v in (*params, *vs)]
        sql = f"SELECT count(*) FROM ({' UNION '.join(parts)})"
        return int(conn.execute(sql, tuple(values)).fetchone()[0])


#: How many of the commonest types a pass tests one by one (see ``scan_where``).
COMMON_TYPES = 3


def _seq(row: tuple[Any, ...]) -> int:
    return int(row[0])


def _any_of(terms: Iterable[Term]) -> tuple[str, list[Any]]:
    """The OR of terms; terms that are one ``IN`` on the same column become one ``IN``."""
    merged: dict[str, frozenset[str]] = {}
    parts: list[str] = []
    params: list[Any] = []
    for term in terms:
        if len(term.conditions) == 1 and not term.extra:
            name, allowed = term.conditions[0]
            merged[name] = merged.get(name, frozenset()) | allowed
            continue
        clause, values = term.sql()
        if clause == "1":
            return "1", []
        parts.append(clause)
        params += values
    for name, allowed in merged.items():
        clause, more = Term(((name, allowed),)).sql()
        parts.insert(0, clause)
        params[:0] = more
    return " OR ".join(f"({p})" for p in parts) or "0", params


def minimal_terms(terms: Iterable[Term]) -> tuple[Term, ...]:
    """Drop impossible terms and terms another term admits (keeping the first of equals)."""
    pool = [t for t in dict.fromkeys(terms) if all(values for _, values in t.conditions)]
    keep: list[Term] = []
    for i, term in enumerate(pool):
        if any(
            j != i and other.admits(term) and (not term.admits(other) or j < i)
            for j, other in enumerate(pool)
        ):
            continue
        keep.append(term)
    return tuple(keep)


def candidate_plan(
    rules: Sequence[CompiledRule],
    window_filters: Iterable[tuple[Condition, ...]] | None,
    hook_kinds: frozenset[str] | None,
    gates: Mapping[str, tuple[Clause, ...]] | None = None,
    scan: bool = False,
    order: tuple[str, ...] = (),
    columns: tuple[Clause, ...] = (),
) -> CandidatePlan:
    """The union of the rules' prefilters, the window index's feeds and the hooks' kinds.

    ``window_filters`` holds, per window index, the literal filters its rows
    must pass (an empty tuple: it needs every row); ``None`` means the host
    is not the window index, whose needs are unknown, so every row is read.
    ``hook_kinds`` is :attr:`FireHooks.row_kinds` (``None``: every row).
    ``gates`` maps a rule name to the SQL gates its term carries; ``scan``
    reads the candidates in one pass over the table (see :class:`CandidatePlan`).
    """
    if window_filters is None or hook_kinds is None:
        return CandidatePlan(None, columns=columns)
    gates = gates or {}
    terms: list[Term] = []
    for cr in rules:
        base = for_rule(cr).term()
        terms.append(Term(base.conditions, base.extra + gates.get(cr.rule.name, ())))
    for filters in window_filters:
        if not filters:
            return CandidatePlan(None, columns=columns)
        terms.append(Term(tuple(sorted(filters))))
    terms.extend(Term((("kind", frozenset({k})),)) for k in sorted(hook_kinds))
    return CandidatePlan(minimal_terms(terms), scan, order, columns)
