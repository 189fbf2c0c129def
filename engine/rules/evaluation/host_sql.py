"""The SQL primitive host: one indexed query per primitive call.

Why keep it beside the fast window index: it is the independent
implementation that explain uses to recompute a stored result (and to list
the seqs a call counted), the naive baseline of the benchmarks, and the
reference a test compares :class:`engine.rules.evaluation.window.WindowIndex` against.
Its semantics are the window index's: rows with ``seq <=`` the evaluated
row's seq and ``at > now - window``; an absent column matches ``""``;
``distinct`` counts distinct non-empty values; results saturate. The clauses
come from :mod:`engine.rules.evaluation.aggsql`, which also bounds ``at <= now`` so an
index reads only the window (``at`` is non-decreasing in ``seq``).

A sqlite error while reading is re-raised as :class:`StoreReadError` and
remembered, so the evaluator can record that row as ``store_error`` (the one
documented exception to live/backtest equivalence) instead of blaming the
rule.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from engine.rules.evaluation.aggsql import window_where
from engine.rules.language.model import SATURATION, SELECTOR_KEYS

_ALLOWED = frozenset(SELECTOR_KEYS)


class StoreReadError(RuntimeError):
    """A primitive could not read the journal (locked, corrupt, closed)."""


def _where(
    selector: Mapping[str, str], window_ms: int, seq: int, now_ms: int
) -> tuple[str, list[Any]]:
    return window_where(selector, window_ms, seq, now_ms)


class SqlHost:
    """A :class:`PrimitiveHost` that queries ``rule_journal`` at a fixed position.

    Call :meth:`set_position` with the evaluated row's seq and ``at`` before
    evaluating; every call then sees exactly the rows the rule may see.
    """

    def __init__(self, conn: sqlite3.Connection, table: str = "rule_journal") -> None:
        self.conn = conn
        #: The table asked: the journal, or a replay's copy of one shape's rows
        #: (:mod:`engine.rules.evaluation.shape_tables`), which has the same columns.
        self.table = table
        self.seq = 0
        self.now_ms = 0
        self.store_error: str | None = None
        self.queries = 0

    def set_position(self, seq: int, now_ms: int) -> None:
        self.seq = seq
        self.now_ms = now_ms

    def feed(self, row: Sequence[Any]) -> None:
        """Move to a row (tuple: seq, at, ...); the journal itself already holds it."""
        self.seq = row[0]
        self.now_ms = row[1]

    def take_store_error(self) -> str | None:
        """The store error seen since the last call (then forgotten)."""
        err, self.store_error = self.store_error, None
        return err

    def _scalar(self, sql: str, params: list[Any]) -> int:
        self.queries += 1
        try:
            row = self.conn.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            self.store_error = f"{type(exc).__name__}: {exc}"
            raise StoreReadError(self.store_error) from None
        return int(row[0]) if row else 0

    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        where, params = _where(selector, window_ms, self.seq, self.now_ms)
        sql = f"SELECT count(*) FROM (SELECT 1 FROM {self.table} WHERE {where} LIMIT {SATURATION})"
        return self._scalar(sql, params)

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        where, params = _where(selector, window_ms, self.seq, self.now_ms)
        return self._scalar(f"SELECT EXISTS (SELECT 1 FROM {self.table} WHERE {where})", params) > 0

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        if field not in _ALLOWED:
            raise ValueError(f"distinct field {field!r} is not one of {', '.join(SELECTOR_KEYS)}")
        where, params = _where(selector, window_ms, self.seq, self.now_ms)
        sql = (
            f"SELECT count(*) FROM (SELECT DISTINCT {field} FROM {self.table} WHERE {where}"
            f" AND {field} IS NOT NULL AND {field} != '' LIMIT {SATURATION})"
        )
        return self._scalar(sql, params)

    def matching_seqs(
        self, selector: Mapping[str, str], window_ms: int, limit: int = 1000
    ) -> tuple[list[int], int]:
        """The seqs a call with this selector counted (first ``limit``) and their total."""
        where, params = _where(selector, window_ms, self.seq, self.now_ms)
        total = self._scalar(
            f"SELECT count(*) FROM (SELECT 1 FROM {self.table} WHERE {where} LIMIT {SATURATION})",
            params,
        )
        self.queries += 1
        try:
            rows = self.conn.execute(
                f"SELECT seq FROM rule_journal WHERE {where} ORDER BY seq LIMIT ?", [*params, limit]
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreReadError(f"{type(exc).__name__}: {exc}") from None
        return [int(r[0]) for r in rows], total
