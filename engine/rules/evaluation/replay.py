"""How a backtest answers each aggregate and which rule gates SQL tests before rows are read.

Why: the window index answers a primitive in a microsecond but must be fed
every row its selector can match; for a selector with no literal ``type``
(``count({"harness": event.harness}, duration("5m"))``) that is every row of
the journal, and for ``{"path": event.path, "type": "file_edited"}`` every
file_edited row, each read into Python. SQL answers the same question from
the window alone, on a journal index that leads with the selector's keys or
on a copy of the shape's rows indexed for it (:mod:`engine.rules.evaluation.shape_tables`),
at the price of a query per call, and can test a rule's gate
(:mod:`engine.rules.language.gates`) inside the query that reads its candidates, so
rows failing the threshold never reach Python. When every call of a shape is
a gate on the evaluated row's own values, a tally (:mod:`engine.rules.evaluation.tallies`)
reads just the shape's key columns once and knows each row's answer, so its
gates cost no query at all. Which is cheaper depends on how many rows a feed
needs and how many calls the rules make, so :func:`plan_replay` estimates
both from index-only counts and picks per shape.

The choice changes the cost, never the result: SQL counts exactly what the
window index would hold (:mod:`engine.rules.evaluation.aggsql`, and a test holds the SQL
host equal to the window index), a tally keeps the window index's own
buckets, and an SQL gate is exactly the gate the evaluator tests.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.rules.evaluation.aggsql import (
    Indexes,
    gate_predicate,
    gate_value,
    index_keys,
    journal_indexes,
)
from engine.rules.evaluation.evaluator import FastHost
from engine.rules.evaluation.host_replay import ReplayHost, ShapeKey, shape_key
from engine.rules.evaluation.replay_costs import (
    C_BUCKET,
    C_CALL,
    C_COPY,
    C_ENTRY,
    C_FEED,
    C_READ,
    C_SCAN,
    C_TALLY,
    Estimator,
    Stats,
)
from engine.rules.evaluation.shape_tables import ShapeTable, shape_table
from engine.rules.evaluation.tallies import Tally, self_gated
from engine.rules.evaluation.window import Shape, group_filters, plan_rule
from engine.rules.language.gates import Gate
from engine.rules.language.model import CompiledRule
from engine.rules.language.prefilter import Clause, Condition, for_rule

#: ``auto`` compares costs; ``sql`` prefers SQL on the journal's indexes, ``table``
#: copies of the shapes' rows, ``tally`` tallies where they apply (else as ``auto``),
#: ``window`` the fed window index (the plain replay).
Mode = Literal["auto", "sql", "table", "tally", "window"]

#: A row read through an index (entry, then table lookup) against one read in a pass.
SCAN_FACTOR = 4
#: A rule's calls are answered by the candidate query when its candidate rows are
#: at least this share (1/n) of the range (see ``_answers``).
ANSWER_SHARE = 256

_JOURNAL = "rule_journal"


@dataclass(frozen=True)
class ReplayPlan:
    """How one replay answers aggregates, reads candidates and tests gates.

    ``sql_shapes`` maps each SQL-served shape to the table asked (the journal
    or a shape table in ``tables``, created by :meth:`open`); ``gates`` maps a
    rule name to the SQL gates its candidate term carries.
    """

    sql_shapes: Mapping[ShapeKey, str] = field(default_factory=dict)
    gates: Mapping[str, tuple[Clause, ...]] = field(default_factory=dict)
    #: The rules' candidates are a large share of the range: read them in one pass.
    scan: bool = False
    #: The types the rules name, by estimated rows, most first (for that pass).
    order: tuple[str, ...] = ()
    #: Shape tables to create: (table, rows after this ``at``, last seq, indexes).
    tables: tuple[tuple[ShapeTable, int, int, tuple[tuple[str, ...], ...]], ...] = ()
    filters: Mapping[ShapeKey, tuple[Condition, ...]] = field(default_factory=dict)
    shapes: tuple[Shape, ...] | None = None
    #: Calls whose answers the candidate query computes as extra columns (SQL, with
    #: values), for the rows where a rule that makes them holds its other conditions.
    answers: tuple[tuple[Gate, Clause], ...] = ()
    #: Tallies to run: (tally, rows after this ``at``, first seq, last seq); their
    #: shapes are in ``sql_shapes`` too (the journal answers what a tally cannot).
    tallies: tuple[tuple[Tally, int, int, int], ...] = ()

    def open(
        self,
        conn: sqlite3.Connection,
        spans: Callable[[int], Generator[Any, None, None]] | None = None,
    ) -> None:
        """Create the shape tables (a pass over each shape's rows, in C) and run the tallies.

        ``spans(i)`` gives tally ``i``'s rows as a producer thread read them
        (:meth:`~engine.rules.evaluation.pipeline.PipelinedCandidates.tally_spans`).
        """
        for table, after_at, last_seq, indexes in self.tables:
            table.create(conn, after_at, last_seq, indexes)
        for i, (tally, after_at, first_seq, last_seq) in enumerate(self.tallies):
            read = None if spans is None else spans(i)
            try:
                tally.run(conn, after_at, first_seq, last_seq, read)
            finally:
                if read is not None:
                    read.close()

    def close(self, conn: sqlite3.Connection) -> None:
        for table, *_ in self.tables:
            table.drop(conn)
        for tally, *_ in self.tallies:
            tally.drop(conn)

    def host(self, rules: Sequence[CompiledRule], conn: sqlite3.Connection) -> FastHost:
        shapes = self.shapes
        if shapes is None:
            shapes = tuple(s for cr in rules for s in plan_rule(cr.rule).shapes)
        if not self.sql_shapes:
            return FastHost(shapes)
        tallied = {key: tally for tally, *_ in self.tallies for key in tally.keys}
        return ReplayHost(shapes, self.sql_shapes, self.filters, conn, tallied)


def plan_replay(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    first: tuple[int, int],
    last_seq: int,
    rows: int,
    span_ms: int,
    mode: Mode = "auto",
) -> ReplayPlan:
    """Choose, per aggregate shape and per gate, the cheaper way to replay ``first``..``last_seq``.

    ``first`` is the range's first (seq, at). Per shape the options are: feed
    the window index (its rows read into Python), SQL on a journal index that
    seeks on its keys, SQL on a shape table, or (for self gates) a tally; the
    estimate of each adds what the rules using the shape would pay per
    candidate row (a gate tested in SQL when it has a floor, else a query per
    call, nothing past a tally's table).
    """
    if mode == "window" or rows <= 0:
        return ReplayPlan()
    first_seq, first_at = first
    stats = Stats(conn, first_seq, last_seq, rows, max(span_ms, 1))
    est = Estimator(stats, journal_indexes(conn))
    planned = {cr.rule.name: plan_rule(cr.rule).shapes for cr in rules}
    groups = group_filters(s for shapes in planned.values() for s in shapes)
    uses = {name: {shape_key(s) for s in shapes} for name, shapes in planned.items()}
    gates = {cr.rule.name: for_rule(cr).gates for cr in rules}
    cands = {cr.rule.name: _candidates(stats, cr) for cr in rules}
    # A copy that filters on unindexed columns reads the whole range once, shared by
    # the shapes filtering the same columns (see ``_tables``).
    sharing: dict[tuple[str, ...], int] = {}
    for filters in groups.values():
        cols = tuple(name for name, _ in filters)
        sharing[cols] = sharing.get(cols, 0) + 1
    tallied = self_gated(rules, groups)
    tally_share: dict[tuple[Condition, ...], int] = {}
    for key in tallied:
        tally_share[groups[key]] = tally_share.get(groups[key], 0) + 1
    where: dict[ShapeKey, str] = {}
    for key, filters in groups.items():
        users = [
            (cands[n], [g for g in gates[n] if g.shape_key == key]) for n in uses if key in uses[n]
        ]
        share = sharing[tuple(name for name, _ in filters)]
        choice = _choose(
            est, key, filters, users, mode, share, tally_share.get(filters, 0) * (key in tallied)
        )
        if choice is not None:
            where[key] = choice
    tables, names = _tables(where, groups, first_at, last_seq)
    tallies = _tallies(where, groups, tallied, first, last_seq)
    sql_shapes = {key: (names[key] if kind == "table" else _JOURNAL) for key, kind in where.items()}
    chosen: dict[str, tuple[Clause, ...]] = {}
    for name, rule_gates in gates.items():
        clauses = [s.clause(name) for s, *_ in tallies if name in s.gates]
        for gate in rule_gates:
            key = gate.shape_key
            if where.get(key) == "tally":
                continue  # tested by the tally's clause
            table = sql_shapes.get(key)
            pred = gate_predicate(gate, est.available, None if table in (None, _JOURNAL) else table)
            if pred is None:
                continue
            cheap = est.gate_cost(key, groups.get(key, ()), gate, "journal") < C_READ
            if table is not None or cheap or mode != "auto":
                clauses.append((pred[0], tuple(pred[1])))
        if clauses:
            chosen[name] = tuple(clauses)
    # Through an index, each candidate costs a table lookup (a few units); one
    # pass over the range costs about one unit per row. Feeds count as candidates.
    fed = [f for k, f in groups.items() if k not in sql_shapes]
    feeds = sum(_feed_rows(stats, f) for f in fed)
    scan = (sum(cands.values()) + feeds) * SCAN_FACTOR > rows
    weight: dict[str, float] = {}
    for cr in rules:
        types = for_rule(cr).get("type") or frozenset()
        for t in types:
            weight[t] = weight.get(t, 0.0) + cands[cr.rule.name] / len(types)
    order = tuple(sorted(weight, key=lambda t: (-weight[t], t)))
    shapes = tuple(s for v in planned.values() for s in v)
    literal = {k: groups[k] for k in sql_shapes}
    busy = [cr for cr in rules if cands[cr.rule.name] * ANSWER_SHARE >= rows]
    answered = {k: t for k, t in sql_shapes.items() if where[k] != "tally"}
    answers = _answers(busy, answered, est.available)
    return ReplayPlan(sql_shapes, chosen, scan, order, tables, literal, shapes, answers, tallies)


def _tallies(
    where: Mapping[ShapeKey, str],
    groups: Mapping[ShapeKey, tuple[Condition, ...]],
    tallied: Mapping[ShapeKey, Mapping[str, tuple[Gate, ...]]],
    first: tuple[int, int],
    last_seq: int,
) -> tuple[tuple[Tally, int, int, int], ...]:
    """One tally per literal filter, shared by the tallied shapes with that filter."""
    by_filter: dict[tuple[Condition, ...], list[ShapeKey]] = {}
    for key, kind in where.items():
        if kind == "tally":
            by_filter.setdefault(groups[key], []).append(key)
    out = []
    for filters, keys in by_filter.items():
        rule_gates: dict[str, tuple[Gate, ...]] = {}
        for key in keys:
            for name, found in tallied[key].items():
                rule_gates[name] = rule_gates.get(name, ()) + found
        after = first[1] - max(k[2] for k in keys)
        out.append((Tally(filters, keys, rule_gates), after, first[0], last_seq))
    return tuple(out)


def _answers(
    rules: Sequence[CompiledRule], sql_shapes: Mapping[ShapeKey, str], available: Indexes
) -> tuple[tuple[Gate, Clause], ...]:
    """Per SQL-served gate call, its exact answer at the rows where a rule making it applies.

    The evaluator asks a gate's call on every row where its rule's guards and
    exclusions hold; computed in the candidate query, those answers cost no
    query from Python (``CASE``: only for those rows). Each column costs a
    little on every row read, so only the calls of rules with many candidate
    rows get one (the caller picks them); the rest are asked when needed.
    """
    conditions: dict[Gate, list[tuple[str, list[Any]]]] = {}
    for cr in rules:
        pf = for_rule(cr)
        for gate in pf.gates:
            table = sql_shapes.get(gate.shape_key)
            if table is None:
                continue
            call = Gate(gate.fn, gate.field, gate.selector, gate.window_ms, ">=")  # the call alone
            conditions.setdefault(call, []).append(pf.term().sql())
    out = []
    for call, whens in conditions.items():
        table = sql_shapes[call.shape_key]
        value = gate_value(call, available, None if table == _JOURNAL else table)
        if value is None:
            continue
        when = " OR ".join(f"({w})" for w, _ in whens)
        params = [v for _, vs in whens for v in vs] + value[1]
        out.append((call, (f"CASE WHEN {when} THEN {value[0]} END", tuple(params))))
    return tuple(out)


def _choose(
    est: Estimator,
    key: ShapeKey,
    filters: tuple[Condition, ...],
    users: Sequence[tuple[int, Sequence[Gate]]],
    mode: Mode,
    share: int = 1,
    tallies: int = 0,
) -> str | None:
    """``journal``, ``table``, ``tally`` or None (the window index) for one shape.

    ``share`` is how many shapes filter the same columns (they would share
    one shape table, and the pass that fills it); ``tallies``, when a tally can
    answer the shape (:func:`~engine.rules.evaluation.tallies.self_gated`), how
    many shapes with its literal filter one tally would answer (else 0).
    """
    feed = _feed_rows(est.stats, filters)
    copy = feed * C_COPY + (est.stats.rows * C_SCAN / share if _unindexed(filters) else 0)
    options = {
        "window": feed * C_FEED,
        "table": copy + _calls(est, key, filters, users, "table"),
    }
    journal = index_keys(key[0], est.available) is not None
    if journal:
        options["journal"] = _calls(est, key, filters, users, "journal")
    if tallies and journal:  # the journal answers the calls a tally does not know
        # Each candidate then only looks its seq up in the tally's table.
        candidates = sum(c for c, _ in users)
        options["tally"] = feed * (C_TALLY / tallies + C_BUCKET) + candidates * C_ENTRY
        if mode == "tally":
            return "tally"
    if mode == "sql" and "journal" in options:
        return "journal"
    if mode in ("sql", "table"):
        return "table"
    best = min(options, key=lambda k: options[k])
    return None if best == "window" else best


def _calls(
    est: Estimator,
    key: ShapeKey,
    filters: tuple[Condition, ...],
    users: Sequence[tuple[int, Sequence[Gate]]],
    where: str,
) -> float:
    """What the rules using a shape pay per candidate when SQL (on ``where``) answers it."""
    total = 0.0
    for candidates, gates in users:
        floored = [g for g in gates if g.floor is not None]
        if floored:
            per_row = min(est.gate_cost(key, filters, g, where) for g in floored)
        else:
            per_row = C_CALL + est.window_rows(key, filters, where)
        total += candidates * per_row
    return total


def _tables(
    where: Mapping[ShapeKey, str],
    groups: Mapping[ShapeKey, tuple[Condition, ...]],
    first_at: int,
    last_seq: int,
) -> tuple[
    tuple[tuple[ShapeTable, int, int, tuple[tuple[str, ...], ...]], ...], dict[ShapeKey, str]
]:
    """One shape table per literal filter, shared by the shapes it serves.

    Shapes filtering the same unindexed columns (``outcome`` = error, =
    timeout…) share one table holding the union of their rows, so one pass
    over the range fills it; each query still names its own literal, so it
    counts only its rows. (A ``kind``/``type`` filter is read through an index
    at no such cost, and a table per filter keeps each one small.) Each shape
    gets an index on its keys, then ``at``, then distinct's field.
    """
    by_columns: dict[Any, list[ShapeKey]] = {}
    for key, kind in where.items():
        if kind == "table":
            filters = groups[key]
            group = tuple(n for n, _ in filters) if _unindexed(filters) else filters
            by_columns.setdefault(group, []).append(key)
    out = []
    names: dict[ShapeKey, str] = {}
    for keys in by_columns.values():
        cols = [n for n, _ in groups[keys[0]]]
        union = {c: frozenset().union(*(dict(groups[k])[c] for k in keys)) for c in cols}
        filters = tuple(sorted(union.items()))
        columns = [c for k in keys for c in (*k[0], *([k[1]] if k[1] else []))]
        table = shape_table(columns, None, filters)
        wanted = list(dict.fromkeys((*k[0], "at", *([k[1]] if k[1] else [])) for k in keys))
        # An index that is the prefix of another is served by that one.
        indexes = tuple(i for i in wanted if not any(o != i and o[: len(i)] == i for o in wanted))
        after = first_at - max(k[2] for k in keys)
        out.append((table, after, last_seq, indexes))
        names.update((k, table.name) for k in keys)
    return tuple(out), names


def _candidates(stats: Stats, cr: CompiledRule) -> int:
    """Rows of the range a rule's kind and type conditions admit (an upper bound)."""
    pf = for_rule(cr)
    if pf.impossible:
        return 0
    kinds = frozenset({pf.kind}) & (pf.get("kind") or frozenset({pf.kind}))
    return stats.count(kinds, pf.get("type"))


def _feed_rows(stats: Stats, filters: Sequence[Condition]) -> int:
    """Rows a feed of this shape reads (an estimate)."""
    return stats.count_where(filters)


def _unindexed(filters: Sequence[Condition]) -> bool:
    """Whether reading these rows needs a pass over the table (no index leads with them)."""
    names = {name for name, _ in filters}
    return not names or not names & {"kind", "type"}
