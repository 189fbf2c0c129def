"""Tallies: a replay's pass in Python over one literal filter's rows, for gates on its own values.

Why: ``event.type == "file_edited" && count({"path": event.path, "type":
"file_edited"}, duration("10m")) >= 6`` asks its count on every file_edited row,
with that row's own path. Fed to the window index, every file_edited row is
read whole into Python; answered by SQL, those rows are first copied into a
table indexed by path (:mod:`engine.rules.evaluation.shape_tables`), then each
row's gate is one window query. A tally reads only the columns the shapes key
on, in seq order through the journal's ``type`` index, keeps the window
index's own sliding-window buckets (:func:`~engine.rules.evaluation.window.bucket_index`)
over them, and so has each call's exact answer at every row of the filter
(on the 45-day demo journal, 318k file edits: about 1.0s, against 1.7s for
the copy and its window queries). The rows where a rule's gates pass go to
a temporary table the candidate query tests (``seq IN``), so no other row of
that rule is read whole, and the replay's host answers those calls from the
tally (:class:`~engine.rules.evaluation.host_replay.ReplayHost`).

When it applies (:func:`self_gated`): every call of the shape, in every rule
making it, is a *self gate*, a gate (:mod:`engine.rules.language.gates`) with
a floor whose selector takes each key from the row's own column of that name,
or a literal the rule's conditions pin that column to, in a rule whose
conditions keep its rows inside the shape's literal filter. Then at every row
the rule is decided on, its call is exactly the tally's bucket for that row,
and a row the tally leaves out is a row where a gate fails. Any other call
(a hold re-evaluated at a tick with an older row's values) is not the
tally's: the host asks SQL on the journal, as for any SQL-served shape.

In a pipelined replay the first producer thread has read the rows already,
as columns (:mod:`engine.rules.evaluation.tally_columns`); :meth:`Tally.run`
counts those, or reads the rows itself where the columns cannot carry one.
"""

from __future__ import annotations

import itertools
import operator
import os
import sqlite3
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from engine.rules.evaluation import tally_columns
from engine.rules.evaluation.window import COL, SWEEP_EVERY, bucket_index
from engine.rules.language.gates import Gate, count_test
from engine.rules.language.model import SATURATION, CompiledRule
from engine.rules.language.prefilter import Clause, Condition, Term, for_rule

ShapeKey = tuple[tuple[str, ...], str | None, int]

_COUNTER = itertools.count(1)
_SEQ = operator.itemgetter(0)
_STRINGS = operator.itemgetter(-1)


class Tally:
    """One pass over the rows passing ``filters``: each shape's answer there, each rule's rows.

    ``keys`` are the shapes (sorted keys, distinct field, window) answered;
    ``gates`` maps a rule name to its gates on them. :meth:`run` reads the
    rows; a rule's candidate rows are then those in its table (:meth:`clause`).
    """

    def __init__(
        self,
        filters: tuple[Condition, ...],
        keys: Sequence[ShapeKey],
        gates: Mapping[str, tuple[Gate, ...]],
    ) -> None:
        self.filters = filters
        self.keys = tuple(keys)
        self.gates = dict(gates)
        n = next(_COUNTER)
        self.tables = {
            name: f"temp.tally_{os.getpid()}_{n}_{i}" for i, name in enumerate(sorted(self.gates))
        }
        self._filter_cols = tuple((COL[c], allowed) for c, allowed in filters)
        self._key_cols = {key: tuple((k, COL[k]) for k in key[0]) for key in self.keys}
        self._seqs = array("q")
        self._values = {key: array("q") for key in self.keys}

    def clause(self, rule: str) -> Clause:
        """The candidate query's test for ``rule``: its gates on these shapes pass at the row."""
        return (f"rule_journal.seq IN (SELECT seq FROM {self.tables[rule]})", ())

    def names(self) -> list[str]:
        """The columns a row is read with, after seq and at (see :meth:`run`)."""
        return sorted({c for k in self._shapes() for c in (*k[0], *([k[1]] if k[1] else []))})

    def _shapes(self) -> list[ShapeKey]:
        """The shapes as the buckets key them: without a column the filter pins to one value."""
        fixed = {name for name, allowed in self.filters if len(allowed) == 1}
        return [(tuple(k for k in key[0] if k not in fixed), key[1], key[2]) for key in self.keys]

    def column_statement(self) -> tuple[str, tuple[Any, ...]]:
        """The statement a producer reads this tally's rows with, a span of time at a time."""
        names = self.names()
        return tally_columns.statement(names, sorted({*names, *self._used()}), self.filters)

    def run(
        self,
        conn: sqlite3.Connection,
        after_at: int,
        first_seq: int,
        last_seq: int,
        spans: Iterator[Any] | None = None,
    ) -> bool:
        """Read the rows (``at > after_at``, ``seq <= last_seq``); keep answers from ``first_seq``.

        ``spans`` are the rows as a producer read them in columns
        (:mod:`engine.rules.evaluation.tally_columns`); without them, or when
        they cannot carry a row exactly, the rows are read here row by row.
        Rows go through in batches, each batch through one shape's buckets
        after the other (the shapes' buckets are independent), so Python runs
        one call per row and shape; the rules' tests then run on the answers.
        True when the rows came from ``spans``.
        """
        names = self.names()
        if spans is not None:
            try:
                self._count(conn, names, first_seq, tally_columns.batches(spans, SWEEP_EVERY))
                return True
            except tally_columns.Unreadable:
                pass
        self._count(conn, names, first_seq, self._row_batches(conn, names, after_at, first_seq,
                                                              last_seq))  # fmt: skip
        return False

    def _row_batches(
        self, conn: sqlite3.Connection, names: Sequence[str], after_at: int, first: int, last: int
    ) -> Iterator[list[tuple[Any, ...]]]:
        for part in ((0, first - 1), (first, last)):
            rows = self._rows(conn, names, after_at, *part)
            while batch := rows.fetchmany(SWEEP_EVERY):
                yield batch

    def _count(
        self,
        conn: sqlite3.Connection,
        names: Sequence[str],
        first_seq: int,
        batches: Iterable[list[tuple[Any, ...]]],
    ) -> None:
        """Run ``batches`` (rows in seq order) through the buckets, then fill the rules' tables."""
        self._seqs = array("q")
        self._values = {key: array("q") for key in self.keys}
        pos = {name: i + 2 for i, name in enumerate(names)}
        buckets = [bucket_index(*shape, pos) for shape in self._shapes()]
        adders = [b.add_count for b in buckets]
        values = [self._values[k] for k in self.keys]
        undecided: list[int] = []
        for rows in batches:
            cut = 0 if rows[0][0] >= first_seq else bisect_left(rows, first_seq, key=_SEQ)
            if cut:  # rows before the range only warm the buckets
                for add in adders:
                    for _ in map(add, rows[:cut]):
                        pass
            batch = rows[cut:] if cut else rows
            if batch:
                for add, kept in zip(adders, values, strict=True):
                    kept.extend(map(add, batch))
                self._seqs.extend(map(_SEQ, batch))
                if not all(map(_STRINGS, batch)):
                    undecided += [row[0] for row in batch if not row[-1]]
            for bucket in buckets:  # drop expired entries of buckets no row touched
                bucket.sweep(rows[-1][1])
        self._keep(conn, undecided)

    def _keep(self, conn: sqlite3.Connection, undecided: list[int]) -> None:
        """Fill each rule's table: the rows where its gates pass, and rows CEL must decide.

        A row value that is not a string leaves a gate undecided in the
        evaluator (CEL decides and reports it), so such a row is kept.
        """
        for name, gates in self.gates.items():
            ok: Iterable[bool] = itertools.repeat(True)
            for gate in gates:
                ok = map(operator.and_, ok, map(count_test(gate), self._values[gate.shape_key]))
            rows = sorted({*itertools.compress(self._seqs, ok), *undecided})
            table = self.tables[name]
            conn.execute(f"CREATE TABLE {table} (seq INTEGER PRIMARY KEY)")
            conn.executemany(f"INSERT INTO {table} (seq) VALUES (?)", zip(rows))

    def _rows(
        self, conn: sqlite3.Connection, names: Sequence[str], after_at: int, first: int, last: int
    ) -> sqlite3.Cursor:
        """(seq, at, the named columns, absent values as ``""``, all-strings flag) in seq order.

        The rows of the filter with ``at > after_at`` and seq in ``first..last``;
        the flag tells whether every column a gate takes a value from holds a
        string (or nothing), as the evaluator's gate checks require.
        """
        where, params = Term(self.filters).sql()
        columns = "".join(f", COALESCE({c}, '')" for c in names)
        flag = " AND ".join(f"typeof({c}) IN ('text', 'null')" for c in self._used()) or "1"
        return conn.execute(
            f"SELECT seq, at{columns}, {flag} FROM rule_journal"
            f" WHERE at > ? AND seq BETWEEN ? AND ? AND {where} ORDER BY seq",
            (after_at, first, last, *params),
        )

    def _used(self) -> list[str]:
        """The columns a gate's selector takes a row's value from."""
        return sorted({v for gs in self.gates.values() for g in gs for _, (t, v) in g.selector
                       if t == "row"})  # fmt: skip

    def answer(
        self, key: ShapeKey, row: Sequence[Any] | None, selector: Mapping[str, str], now: int
    ) -> int | None:
        """The call's result at ``row`` when it is the row's own bucket (else None: not known here).

        ``row`` is the row being evaluated (the host's last fed row) and ``now``
        the host's time: the tally knows the call at that row, at that row's
        time, for a selector holding that row's own values.
        """
        if row is None or row[1] != now:
            return None
        for col, allowed in self._filter_cols:
            if row[col] not in allowed:
                return None
        for name, col in self._key_cols[key]:
            if selector[name] != row[col]:
                return None
        seq = row[0]
        seqs = self._seqs
        i = bisect_left(seqs, seq)
        if i == len(seqs) or seqs[i] != seq:
            return None
        return min(self._values[key][i], SATURATION)

    def drop(self, conn: sqlite3.Connection) -> None:
        for table in self.tables.values():
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def self_gated(
    rules: Sequence[CompiledRule], groups: Mapping[ShapeKey, tuple[Condition, ...]]
) -> dict[ShapeKey, dict[str, tuple[Gate, ...]]]:
    """Shapes a tally can answer, each with the gates every rule making it has on it.

    A shape qualifies when its literal filter names ``kind`` or ``type`` (an
    index finds its rows) and every call of it, in every rule, is a self gate
    with a floor (see the module docstring).
    """
    out: dict[ShapeKey, dict[str, tuple[Gate, ...]]] = {}
    refused: set[ShapeKey] = set()
    for cr in rules:
        pf = for_rule(cr)
        conditions = dict(pf.term().conditions)
        for key in {_spec_key(p) for p in cr.rule.primitives}:
            filters = groups.get(key)
            if filters is None or key in refused:
                continue
            calls = [p for p in cr.rule.primitives if _spec_key(p) == key]
            gates = tuple(g for g in pf.gates if g.shape_key == key)
            if (
                not {"kind", "type"} & {name for name, _ in filters}
                or len(gates) != len(calls)
                or not all(_self_gate(g, conditions, filters) for g in gates)
            ):
                refused.add(key)
                out.pop(key, None)
                continue
            out.setdefault(key, {})[cr.rule.name] = gates
    return out


def _spec_key(spec: Any) -> ShapeKey:
    field = spec.field if spec.fn == "distinct" else None
    return (tuple(sorted(spec.selector_keys)), field, spec.window_ms)


def _self_gate(
    gate: Gate, conditions: Mapping[str, frozenset[str]], filters: Iterable[Condition]
) -> bool:
    """Whether at every row the rule is decided on, the call asks that row's own bucket."""
    if gate.floor is None or gate.never:
        return False
    for key, (tag, value) in gate.selector:
        if tag == "row" and value != key:
            return False
        if tag == "lit" and conditions.get(key) != frozenset({value}):
            return False
    for name, allowed in filters:
        pinned = conditions.get(name)
        if pinned is None or not pinned <= allowed:
            return False
    return True
