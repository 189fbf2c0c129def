"""A tally's rows read as columns, one span of journal time per statement, by a producer thread.

Why: a tally (:mod:`engine.rules.evaluation.tallies`) reads every row of its
filter before the replay can start (318k file edits on the 45-day demo
journal). Read row by row, SQLite's share of that read (about half a second)
runs on the replay's own thread, which waits for it. The pipeline's producer
(:mod:`engine.rules.evaluation.pipeline`) runs these statements instead, so
the replay's thread only decodes the columns: seqs and times as text, the
named columns as JSON arrays, a few calls into C per span.

Exactness: the spans partition journal time after the tally's start, so
every row is read once whatever its seq; each span's rows are put in seq
order here. A span holding a value that is not text (JSON would not carry
it as the row holds it), text that is not UTF-8, an error, or a seq below
one of an earlier span (journal time going back, which the journal never
writes but a hand-made row may) is :class:`Unreadable`: the tally then reads
its rows itself, row by row, and sees exactly the rows and errors it always
saw.
"""

from __future__ import annotations

import itertools
import json
import operator
import queue
import sqlite3
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from engine.rules.language.prefilter import Condition, Term

if TYPE_CHECKING:
    from engine.rules.evaluation.tallies import Tally

#: Spans of journal time a tally's read is cut into (a statement, and its text, each).
SPANS = 32
#: Past any journal time: the last span ends here.
_END_AT = 2**63 - 1
#: A tally's last item in the feed (see :class:`TallyFeed`).
_DONE = object()
#: How long the replay waits for a span before checking that the producer lives.
_POLL_S = 0.05

Span = tuple[Any, ...]
_SEQ = operator.itemgetter(0)


class Unreadable(Exception):
    """A span the columns do not carry exactly: the tally reads its rows row by row."""


def statement(
    names: Sequence[str], checked: Sequence[str], filters: tuple[Condition, ...]
) -> tuple[str, tuple[Any, ...]]:
    """The statement reading one span's rows, and the filter's parameters (after the span's).

    Its parameters: the span's (lo, hi] in journal time, the last seq, then
    the filter's. ``checked`` are the columns a gate or bucket reads a value
    from: a row with anything but text or nothing there is counted as odd.
    Every aggregate of one statement sees the rows in the same order, so the
    columns line up; no order is asked for (a sort costs more than the read),
    :func:`batches` puts them in seq order.
    """
    where, params = Term(filters).sql()
    odd = " OR ".join(
        ["typeof(at) != 'integer'", *(f"typeof({c}) NOT IN ('text', 'null')" for c in checked)]
    )
    arrays = "".join(f", json_group_array(COALESCE({c}, ''))" for c in names)
    sql = (
        f"SELECT count(*), sum({odd}), group_concat(seq), group_concat(at){arrays}"
        f" FROM rule_journal WHERE at > ? AND at <= ? AND seq <= ? AND {where}"
    )
    return sql, tuple(params)


def read(
    conn: sqlite3.Connection,
    sql: str,
    params: Sequence[Any],
    after_at: int,
    last_seq: int,
) -> Iterator[Span | sqlite3.Error]:
    """Each span's result row in journal time order (see :func:`statement`), or its error, last."""
    row = conn.execute(
        "SELECT at FROM rule_journal WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (last_seq,)
    ).fetchone()
    top = after_at if row is None or type(row[0]) is not int else max(after_at, row[0])
    edges = [after_at + (top - after_at) * i // SPANS for i in range(SPANS + 1)]
    spans = [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]
    spans.append((top, _END_AT))  # later rows, if journal time ever went back
    for lo, hi in spans:
        try:
            yield conn.execute(sql, (lo, hi, last_seq, *params)).fetchone()
        except sqlite3.Error as exc:  # a BLOB JSON refuses, or the store's own error
            yield exc
            return


def batches(spans: Iterable[Span | BaseException], size: int) -> Iterator[list[tuple[Any, ...]]]:
    """The spans' rows in seq order, ``size`` at a time, as the tally's row read gives them.

    A row is (seq, at, the named columns, 1): the last value is the row
    read's all-strings flag, true on every row here (an odd row makes its
    span :class:`Unreadable`).
    """
    last = None
    for span in spans:
        if isinstance(span, BaseException):
            raise Unreadable from span
        found, odds, seqs, ats, *texts = span
        if not found:
            continue
        if odds or seqs is None or ats is None or None in texts:
            raise Unreadable
        seq_list = list(map(int, seqs.split(",")))
        at_list = list(map(int, ats.split(",")))
        columns = [json.loads(text) for text in texts]
        if any(len(c) != len(seq_list) for c in (at_list, *columns)) or len(seq_list) != found:
            raise Unreadable
        rows = list(zip(seq_list, at_list, *columns, itertools.repeat(1)))
        if not all(map(operator.lt, seq_list, itertools.islice(seq_list, 1, None))):
            rows.sort(key=_SEQ)  # read in index order: a span of several types, or time going back
        if last is not None and rows[0][0] <= last:
            raise Unreadable  # journal time went back across spans (the journal never does that)
        last = rows[-1][0]
        for i in range(0, len(rows), size):
            yield rows[i : i + size]


class TallyFeed:
    """The tallies' spans, read by a producer thread, handed to the replay's thread in order.

    :meth:`read` (the producer) reads each tally's spans in turn and ends
    each with a marker; :meth:`spans` (the replay, tally by tally) takes
    them. The replay takes them as they come, before anything else the
    producer reads, so they wait in an unbounded queue.
    """

    def __init__(self, tallies: Sequence[tuple[Tally, int, int, int]]) -> None:
        self._tallies = list(tallies)
        self._items: queue.Queue[Any] = queue.Queue()

    def read(self, conn: sqlite3.Connection, stop: threading.Event) -> None:
        """Read every tally's spans (a store error goes in its span's place: see :func:`read`)."""
        for i, (tally, after_at, _first, last_seq) in enumerate(self._tallies):
            sql, params = tally.column_statement()
            try:
                for span in read(conn, sql, params, after_at, last_seq):
                    if stop.is_set():
                        return
                    self._items.put((i, span))
            except sqlite3.Error as exc:  # finding the spans' bounds
                if stop.is_set():
                    return
                self._items.put((i, exc))
            self._items.put((i, _DONE))

    def fail(self, exc: BaseException) -> None:
        """The producer failed: :meth:`spans` raises ``exc`` where it waits."""
        self._items.put(exc)

    def spans(self, i: int, alive: Callable[[], bool]) -> Generator[Any, None, None]:
        """Tally ``i``'s spans (tallies are taken in order).

        Closed early (the tally reads its rows itself), it still takes the
        rest of the tally's spans, so the next tally's come next.
        """
        done = False
        try:
            while not done:
                j, span = self._next(alive)
                if j != i:
                    raise RuntimeError(f"the backtest's tallies were read out of order ({j}, {i})")
                done = span is _DONE
                if not done:
                    yield span
        finally:
            while not done:
                done = self._next(alive)[1] is _DONE

    def _next(self, alive: Callable[[], bool]) -> tuple[int, Any]:
        while True:
            try:
                item = self._items.get(timeout=_POLL_S)
            except queue.Empty:
                if not alive() and self._items.empty():
                    raise RuntimeError("the backtest's tally reader stopped") from None
                continue
            if isinstance(item, BaseException):  # the producer itself failed
                raise item
            return cast(tuple[int, Any], item)
