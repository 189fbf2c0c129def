"""A replay's private copy of one aggregate shape's rows, indexed for its window queries.

Why: a shape such as ``count({"path": event.path, "type": "file_edited"},
duration("10m"))`` is asked on every file_edited row. The window index must
then be fed all those rows in Python; SQL on the journal has no index leading
with ``path``, so each query would read every file_edited row of the window
from the table. Copying just the shape's rows (its literal ``kind``/``type``
filter over the replayed range and the longest window before it) into a
temporary table indexed on the selector keys then ``at`` costs one pass in C,
after which each query is a short index range and a rule's gate on the shape
can be tested in SQL before its rows are read (:mod:`engine.rules.evaluation.replay`).

The copy has the journal's column names for the selector keys, ``distinct``'s
field, ``seq`` and ``at``, with absent values stored as ``""`` (so the
queries of :mod:`engine.rules.evaluation.aggsql` mean the same there). It lives in the
connection's ``temp`` schema, which a read-only connection may write, and is
dropped when the replay ends.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.rules.language.model import SELECTOR_KEYS
from engine.rules.language.prefilter import Condition, Term

_COUNTER = itertools.count(1)
_ALLOWED = frozenset(SELECTOR_KEYS)


@dataclass(frozen=True, slots=True)
class ShapeTable:
    """Where one shape's rows are copied: the table, its columns and the rows it takes."""

    name: str  # e.g. temp.replay_4242_3
    columns: tuple[str, ...]  # selector keys, then distinct's field if another column
    filters: tuple[Condition, ...]  # the shape's literal kind/type filter

    def create(
        self,
        conn: sqlite3.Connection,
        after_at: int,
        last_seq: int,
        indexes: Sequence[Sequence[str]],
    ) -> None:
        """Copy the rows with ``at > after_at`` and ``seq <= last_seq`` passing the filters.

        ``indexes`` lists the column lists to index (a shape's keys, ``at``,
        then distinct's field, so its window queries read the index alone).
        """
        for columns in indexes:
            for column in columns:
                if column != "at" and column not in self.columns:
                    raise ValueError(f"cannot index {column!r}: not a column of {self.name}")
        # The table is stored in the order of its first index (then seq): the rows
        # of one key and window are adjacent, and that index costs nothing more.
        first = [c for c in indexes[0] if c != "seq"] if indexes else []
        key = ", ".join([*first, "seq"])
        cols = "".join(f", {c} TEXT NOT NULL" for c in self.columns)
        conn.execute(
            f"CREATE TABLE {self.name} (seq INTEGER NOT NULL, at INTEGER NOT NULL{cols},"
            f" PRIMARY KEY ({key})) WITHOUT ROWID"
        )
        where, params = Term(self.filters).sql() if self.filters else ("1", [])
        names = "".join(f", {c}" for c in self.columns)
        values = "".join(f", COALESCE({c}, '')" for c in self.columns)
        conn.execute(
            f"INSERT INTO {self.name} (seq, at{names})"
            f" SELECT seq, at{values} FROM rule_journal"
            f" WHERE at > ? AND seq <= ? AND {where} ORDER BY {key}",
            (after_at, last_seq, *params),
        )
        schema, table = self.name.split(".", 1)
        for i, columns in enumerate(indexes[1:]):
            conn.execute(f"CREATE INDEX {schema}.ix{i}_{table} ON {table} ({', '.join(columns)})")

    def drop(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.name}")


def shape_table(keys: Iterable[str], field: str | None, filters: Sequence[Condition]) -> ShapeTable:
    """A fresh (not yet created) table for a shape; names are unique in the process."""
    columns = list(dict.fromkeys(keys))
    if field is not None and field not in columns:
        columns.append(field)
    for column in (*columns, *(name for name, _ in filters)):
        if column not in _ALLOWED:
            raise ValueError(f"{column!r} is not a selector column")
    name = f"temp.replay_{os.getpid()}_{next(_COUNTER)}"
    return ShapeTable(name, tuple(columns), tuple(filters))
