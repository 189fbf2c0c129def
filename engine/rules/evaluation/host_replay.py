"""A backtest's primitive host: the window index for fed shapes, SQL for the others.

Why: :mod:`engine.rules.evaluation.replay` decides per aggregate shape whether a replay
feeds the window index or asks SQL (on the journal's indexes, or on a copy of
the shape's rows, :mod:`engine.rules.evaluation.shape_tables`). This host routes each
call accordingly. A shape answered by SQL is never fed, so a replay reads
none of its rows for it.

It answers exactly as the window index would: SQL counts what the index
would hold (rows with ``seq <=`` the row's and ``at > now - window``, see
:mod:`engine.rules.evaluation.aggsql`), and a selector value outside a shape's literal
filter is refused with :class:`~engine.rules.evaluation.window.SelectorNotIndexed`, as
the window index refuses it, instead of being answered.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.rules.evaluation.evaluator import FastHost
from engine.rules.evaluation.host_sql import SqlHost
from engine.rules.evaluation.window import SelectorNotIndexed, Shape

if TYPE_CHECKING:
    from engine.rules.evaluation.tallies import Tally

ShapeKey = tuple[tuple[str, ...], str | None, int]


def shape_key(shape: Shape) -> ShapeKey:
    """The window index group a call site belongs to: (sorted keys, distinct field, window)."""
    fld = shape.field if shape.fn == "distinct" else None
    return (tuple(sorted(shape.keys)), fld, shape.window_ms)


class ReplayHost(FastHost):
    """The window index, except for the shapes in ``tables`` (shape -> table SQL reads).

    ``filters`` holds each SQL-served shape's literal filter (column, allowed
    values). Answers are kept until the next row: the evaluator's gate and CEL
    often ask the same call on the same row. A shape in ``tallies`` is answered
    by its tally (:mod:`engine.rules.evaluation.tallies`) where the tally knows
    the call, by its table otherwise.
    """

    def __init__(
        self,
        shapes: Iterable[Shape],
        tables: Mapping[ShapeKey, str],
        filters: Mapping[ShapeKey, tuple[tuple[str, frozenset[str]], ...]],
        conn: sqlite3.Connection,
        tallies: Mapping[ShapeKey, Tally] | None = None,
    ) -> None:
        super().__init__(s for s in shapes if shape_key(s) not in tables)
        self._hosts = {name: SqlHost(conn, name) for name in set(tables.values())}
        self._route = {
            key: (self._hosts[name], filters.get(key, ())) for key, name in tables.items()
        }
        self._tallies = dict(tallies or {})
        self._answers: dict[tuple[Any, ...], int | bool] = {}
        self._answered_at = -1
        #: The last fed row: a tally answers calls on that row's own values.
        self.row: Sequence[Any] | None = None

    def feed(self, row: Sequence[Any]) -> None:
        self.row = row
        super().feed(row)

    def prime(self, seq: int, call: tuple[Any, ...], value: int | bool) -> None:
        """Give the answer to one call at row ``seq`` ahead of it (from the candidate query).

        ``call`` is (fn, distinct's field or None, sorted selector items,
        window); the answer is used instead of a query while that row is
        evaluated, exactly as an answer this host computed itself.
        """
        if self._answered_at != seq:
            self._answers.clear()
            self._answered_at = seq
        self._answers[call] = value

    def take_store_error(self) -> str | None:
        errors = [e for e in (h.take_store_error() for h in self._hosts.values()) if e]
        return errors[0] if errors else None

    def _ask(
        self, fn: str, field: str | None, selector: Mapping[str, str], window_ms: int
    ) -> int | bool | None:
        """The SQL answer when this shape is SQL-served (None: the window index answers)."""
        shape = (tuple(sorted(selector)), field, window_ms)
        route = self._route.get(shape)
        if route is None:
            return None
        sql, allowed = route
        for name, values in allowed:
            if selector[name] not in values:
                raise SelectorNotIndexed(
                    f"selector {name}={selector[name]!r} is outside the indexed literals"
                )
        if self._answered_at != self.seq:
            self._answers.clear()
            self._answered_at = self.seq
        key = (fn, field, tuple(sorted(selector.items())), window_ms)
        found = self._answers.get(key)
        if found is None and shape in self._tallies:
            row = self.row if self.row is not None and self.row[0] == self.seq else None
            tallied = self._tallies[shape].answer(shape, row, selector, self.now_ms)
            if tallied is not None:
                found = self._answers[key] = bool(tallied) if fn == "exists" else tallied
        if found is None:
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
