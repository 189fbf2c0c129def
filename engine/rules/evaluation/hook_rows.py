"""The rows a replay reads for the fire hooks only while they are due (ticks, mostly).

Why: the lifecycle watches tick rows (:attr:`FireHooks.row_kinds`), one a
minute, 65k over a 45-day journal, and reading all of them cost a starter-pack
backtest more than all its rules: each was read, merged with the candidates,
turned into a row view and handed to a lifecycle that had nothing to do. A
tick only matters to the lifecycle while something is due (a rule version not
yet noted, a simulated hold that a tick may release; see
:meth:`engine.rules.authority.lifecycle.LifecycleHooks.due`), so a backtest reads those
rows on demand: while the hooks are due, the ticks between one candidate row
and the next are read (through the ``(kind, type)`` index, in seq order) and
processed first; while they are not, none is read.

Ticks a rule needs (``on: tick`` rules, aggregates fed every row) are
candidates in their own right and come with the candidate rows; a row is
never processed twice, since this reader only yields rows after the last one
processed.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Callable, Generator, Iterator
from typing import Any

from engine.rules.evaluation.window import ROW_SELECT


class HookRows:
    """Rows of ``kinds`` with seq up to ``last_seq``, handed out while ``due()`` holds."""

    __slots__ = ("_conn", "_done", "_due", "_iter", "_kinds", "_last", "_pairs", "_peek", "read")

    def __init__(
        self,
        conn: sqlite3.Connection,
        kinds: frozenset[str],
        last_seq: int,
        due: Callable[[], bool],
    ) -> None:
        self._conn = conn
        self._kinds = kinds
        self._last = last_seq
        self._due = due
        self._done = 0
        self._iter: Generator[tuple[Any, ...], None, None] | None = None
        self._peek: tuple[Any, ...] | None = None
        self._pairs: list[tuple[str, str]] | None = None
        #: Rows handed out so far.
        self.read = 0

    def before(self, seq: int, done: int) -> Iterator[tuple[Any, ...]]:
        """Rows after ``done`` (the last seq processed) and before ``seq``, while due.

        The due check comes before each row, so processing one row (a tick
        that releases the last hold) can end the run; reading stops (its
        query closed) until the hooks are due again.
        """
        if done > self._done:
            self._done = done
        due = self._due
        while due():
            row = self._next()
            if row is None or row[0] >= seq:
                return
            self._peek = None
            self._done = row[0]
            self.read += 1
            yield row
        self.close()

    def _next(self) -> tuple[Any, ...] | None:
        """The next unprocessed row (kept as the peek), or None when there is none left."""
        peek = self._peek
        if peek is not None and peek[0] > self._done:
            return peek
        self._peek = None
        if self._iter is None:
            self._iter = self._open()
        for row in self._iter:
            if row[0] > self._done:
                self._peek = row
                return row
        return None

    def _open(self) -> Generator[tuple[Any, ...], None, None]:
        """One seq-ordered read per (kind, type) on the ``(kind, type)`` index, merged."""
        if self._pairs is None:
            self._pairs = [(k, t) for k in sorted(self._kinds) for t in self._types(k)]
        sql = ROW_SELECT + " WHERE kind = ? AND type = ? AND seq > ? AND seq <= ? ORDER BY seq"
        cursors = [self._conn.execute(sql, (k, t, self._done, self._last)) for k, t in self._pairs]
        if len(cursors) == 1:
            yield from cursors[0]
        else:
            yield from heapq.merge(*cursors, key=_seq)

    def _types(self, kind: str) -> list[str]:
        """The types stored under ``kind`` (one index seek per type)."""
        found: list[str] = []
        sql = "SELECT type FROM rule_journal WHERE kind = ? ORDER BY type LIMIT 1"
        row = self._conn.execute(sql, (kind,)).fetchone()
        later = "SELECT type FROM rule_journal WHERE kind = ? AND type > ? ORDER BY type LIMIT 1"
        while row is not None:
            found.append(str(row[0]))
            row = self._conn.execute(later, (kind, row[0])).fetchone()
        return found

    @property
    def open(self) -> bool:
        """Whether a read is open (close it when the hooks stop being due)."""
        return self._iter is not None

    def close(self) -> None:
        """End the open read (it is reopened after the last processed row when due again)."""
        if self._iter is not None:
            self._iter.close()
            self._iter = None
        self._peek = None


def _seq(row: tuple[Any, ...]) -> int:
    return int(row[0])
