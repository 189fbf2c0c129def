"""The replay planner's cost model: index-only figures about a range, and what each way costs.

Kept apart from :mod:`engine.rules.evaluation.replay` (the choices) so the estimates,
their units and their sampling are read in one place. Estimates only steer
the choice of how aggregates are answered; every choice gives the same answers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.rules.evaluation.aggsql import Indexes, index_covers, index_keys
from engine.rules.evaluation.host_replay import ShapeKey
from engine.rules.language.gates import Gate
from engine.rules.language.model import KIND_NAMES
from engine.rules.language.prefilter import Condition, Term

#: Cost units: one table row SQLite visits in C. A row read into Python (and fed
#: or evaluated) costs about twenty, a query made from Python about thirty-five,
#: copying a row into a shape table about five, an index entry a quarter.
C_FEED = 20.0
C_READ = 20.0
C_CALL = 35.0
C_COPY = 5.0
C_ENTRY = 0.25
#: A row a pass over the table only tests (copying rows filtered on an unindexed column).
C_SCAN = 0.5
#: A row a tally reads (a few columns, shared by the shapes it answers) and what
#: each shape's buckets then cost on it (see ``tallies``); measured together at
#: about 0.8 of copying the row into a shape table, with no window query after.
C_TALLY = 4.0
C_BUCKET = 1.0
#: Ranges longer than this (in seqs) are counted on slices (see ``Stats._samples``).
SAMPLE_ABOVE = 400_000


@dataclass
class Stats:
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
        by = {name: v for name, v in (("kind", kinds), ("type", types)) if v is not None}
        return self.count_where(tuple(by.items()))

    def count_where(self, conditions: Sequence[Condition]) -> int:
        """Rows of the range passing these literal filters (an estimate on long ranges).

        ``kind``/``type`` filters are counted on the (kind, type) index; any
        other column needs the table, so it is counted on a thinner sample.
        """
        by = dict(conditions)
        if not by:
            return self.rows
        if any(not values for values in by.values()):
            return 0
        indexed = set(by) <= {"kind", "type"}
        if indexed and "kind" not in by:
            # The (kind, type) index serves a seq range only under a kind: name them all.
            by["kind"] = frozenset(KIND_NAMES)
        conds = tuple(sorted(by.items()))
        if conds not in self._counts:
            where, params = Term(conds).sql()
            sql = f"SELECT count(*) FROM rule_journal WHERE seq BETWEEN ? AND ? AND {where}"
            total = 0.0
            for lo, hi, scale in self._samples(64 if indexed else 1024):
                row = self.conn.execute(sql, (lo, hi, *params)).fetchone()
                total += int(row[0]) * scale
            self._counts[conds] = int(total)
        return self._counts[conds]

    def _samples(self, thin: int) -> list[tuple[int, int, float]]:
        """Seq ranges to count in, with their weights: the whole range, or 8 spread slices.

        A count is only an estimate for the cost model, so on a long range 8
        slices of 1/``thin`` of it each, spread over its length, are enough.
        """
        first, last = self.first_seq, self.last_seq
        span = last - first + 1
        if span <= SAMPLE_ABOVE:
            return [(first, last, 1.0)]
        width = max(span // thin, 1)
        step = span // 8
        return [(first + i * step, first + i * step + width - 1, step / width) for i in range(8)]

    def distinct(self, column: str, cap: int = 1000) -> int:
        """How many values ``column`` takes (walking an index that leads with it; capped)."""
        if column not in self._distinct:
            n = 0
            sql = f"SELECT {column} FROM rule_journal WHERE {column} > ? ORDER BY {column} LIMIT 1"
            first = f"SELECT {column} FROM rule_journal WHERE {column} IS NOT NULL"
            first += f" ORDER BY {column} LIMIT 1"
            row = self.conn.execute(first).fetchone()
            while row is not None and n < cap:
                n += 1
                row = self.conn.execute(sql, (row[0],)).fetchone()
            self._distinct[column] = max(n, 1)
        return self._distinct[column]


@dataclass
class Estimator:
    """Cost estimates for one shape's window queries (units: table rows SQLite visits)."""

    stats: Stats
    available: Indexes

    def window_rows(
        self, key: ShapeKey, filters: Iterable[Condition], where: str = "journal"
    ) -> float:
        """Rows one window holds for the values the shape's index seeks on.

        A shape table holds only the shape's rows and is indexed on every key;
        a journal index seeks on some keys and its range holds every row with
        those values. Values of keys other than ``harness`` and ``type`` are
        assumed spread over a hundred values.
        """
        by = dict(filters)
        seek = set(key[0]) if where == "table" else set(index_keys(key[0], self.available) or ())
        kept = by if where == "table" else {k: v for k, v in by.items() if k in seek}
        base = self.stats.count_where(tuple(kept.items())) * key[2] / self.stats.span_ms
        for column in seek - set(by):
            if column in ("harness", "type"):
                base /= self.stats.distinct(column)
            else:
                base /= 100
        return base

    def gate_cost(
        self, key: ShapeKey, filters: Iterable[Condition], gate: Gate, where: str
    ) -> float:
        """Testing one gate on one candidate row in SQL: a seek, index entries, table rows."""
        filters = tuple(filters)
        window = self.window_rows(key, filters, where)
        floor = float(gate.floor or 1)
        if where == "table":  # the index holds every key and the field: no table reads
            return 1 + C_ENTRY * (window if key[1] is not None else min(floor, window))
        wanted = (*key[0], key[1]) if key[1] is not None else key[0]
        if not index_covers(wanted, self.available):
            return 1 + window  # table rows read to test the other keys (or the field)
        if key[1] is not None:
            return 1 + C_ENTRY * window  # distinct values: up to the whole window
        return 1 + C_ENTRY * min(floor, window)
