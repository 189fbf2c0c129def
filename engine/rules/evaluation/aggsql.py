"""The primitives' window semantics as SQL on the journal's indexes (on demand and as gates).

Why one module: the SQL host (:mod:`engine.rules.evaluation.host_sql`) asks a primitive
with bound values, and a backtest tests a rule's gates (:mod:`engine.rules.language.gates`)
inside the query that reads its candidate rows, with the candidate row's own
columns as values. Both must mean exactly what the window index means: rows
with ``seq <=`` the evaluated row's seq and ``at > now - window``, a selector
value ``""`` matching an absent (NULL or empty) column, ``distinct`` counting
non-empty values, results saturating. Writing that once keeps them equal.

Two facts make these queries cheap, and both are pinned: ``at`` is
non-decreasing in ``seq`` (the writer refuses anything else), so ``seq <= s``
implies ``at <= now`` and adding that bound lets an index on ``(…, at)`` read
just the window instead of everything after it; and ``seq`` is written as
``+seq`` so that SQLite never walks the rowid range ``seq <= s`` (the whole
journal before the row) instead of the index.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.rules.language.gates import Gate
from engine.rules.language.model import SATURATION, SELECTOR_KEYS

_ALLOWED = frozenset(SELECTOR_KEYS)


@dataclass(frozen=True, slots=True)
class WindowIndex:
    """A journal index usable for windows: selector keys, then ``at``, then more columns.

    It seeks on ``seek`` (equality) and a range of ``at``; ``covers`` are the
    columns after ``at``, which a query can test without reading the table.
    """

    name: str
    seek: tuple[str, ...]
    covers: frozenset[str] = frozenset()


Indexes = tuple[WindowIndex, ...]


def journal_indexes(conn: sqlite3.Connection) -> Indexes:
    """The store's indexes on ``rule_journal`` that serve windows (older stores lack some)."""
    out: list[WindowIndex] = []
    names = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'rule_journal'"
        " AND sql IS NOT NULL ORDER BY name"
    ).fetchall()
    for (name,) in names:
        cols = [str(r[2]) for r in conn.execute(f"PRAGMA index_info({_quote(str(name))})")]
        if "at" not in cols:
            continue
        at = cols.index("at")
        seek, rest = cols[:at], cols[at + 1 :]
        if seek and all(c in _ALLOWED for c in seek):
            out.append(WindowIndex(str(name), tuple(seek), frozenset(rest) & _ALLOWED))
    return tuple(out)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def index_keys(keys: Iterable[str], available: Indexes) -> tuple[str, ...] | None:
    """The selector keys the best index seeks on before its ``at`` range; None when none can.

    The best index seeks on the most keys (then covers the most of the
    rest). Without one a window query reads the whole journal: such
    aggregates are left to the window index.
    """
    best = _best(keys, available)
    return None if best is None else best.seek


def index_covers(keys: Iterable[str], available: Indexes) -> bool:
    """Whether the best index holds every one of ``keys`` (no table read per row)."""
    present = set(keys)
    best = _best(present, available)
    return best is not None and present <= set(best.seek) | best.covers


def _best(keys: Iterable[str], available: Indexes) -> WindowIndex | None:
    present = set(keys)
    usable = [i for i in available if present.issuperset(i.seek)]
    if not usable:
        return None
    return max(usable, key=lambda i: (len(i.seek), len(present & i.covers), i.name))


def _check_key(key: str) -> None:
    if key not in _ALLOWED:
        raise ValueError(f"selector key {key!r} is not one of {', '.join(SELECTOR_KEYS)}")


def match_values(selector: Mapping[str, str], alias: str = "") -> tuple[list[str], list[Any]]:
    """Clauses matching bound selector values (``""`` matches NULL too), sorted by key."""
    clauses: list[str] = []
    params: list[Any] = []
    for key in sorted(selector):
        _check_key(key)
        value = selector[key]
        if value == "":
            clauses.append(f"({alias}{key} IS NULL OR {alias}{key} = '')")
        else:
            clauses.append(f"{alias}{key} = ?")
            params.append(value)
    return clauses, params


def window_where(
    selector: Mapping[str, str], window_ms: int, seq: int, now_ms: int
) -> tuple[str, list[Any]]:
    """The WHERE clause of one on-demand primitive call at (``seq``, ``now_ms``)."""
    clauses, params = match_values(selector)
    clauses += ["at > ?", "at <= ?", "+seq <= ?"]
    params += [now_ms - window_ms, now_ms, seq]
    return " AND ".join(clauses), params


# -- gates inside the candidate query --------------------------------------------------------

_OUTER = "rule_journal"
_J = "j."


def gate_predicate(
    gate: Gate, available: Indexes, table: str | None = None
) -> tuple[str, list[Any]] | None:
    """SQL true for a candidate row (table ``rule_journal``) only if ``gate`` can pass there.

    ``table`` names a replay's copy of the gate's shape rows to count in
    instead of the journal (it is indexed on every selector key, then ``at``).

    It asks whether the ``floor``-th matching row exists (``EXISTS (… LIMIT 1
    OFFSET floor-1)``), so SQLite stops there. For ``distinct`` it counts the
    distinct values of a subquery limited to ``floor`` instead: SQLite drops a
    ``DISTINCT`` inside ``EXISTS``, which would count repeated values. None
    when the gate has no floor or no index serves it.
    """
    floor = gate.floor
    seek = gate.keys if table is not None else index_keys(gate.keys, available)
    if floor is None or seek is None:
        return None
    if gate.never:
        return "0", []
    return _split_empty(gate, floor, seek, table or "rule_journal")


def gate_value(
    gate: Gate, available: Indexes, table: str | None = None
) -> tuple[str, list[Any]] | None:
    """SQL for the exact result the gate's primitive call gives at a candidate row.

    The same count, distinct count or existence the SQL host computes
    (saturated), with the candidate row's columns as selector values. None
    when no index serves the shape (the query would read the whole journal).
    """
    seek = gate.keys if table is not None else index_keys(gate.keys, available)
    if seek is None:
        return None
    return _split_empty(gate, None, seek, table or "rule_journal")


def _split_empty(
    gate: Gate, floor: int | None, seek: tuple[str, ...], table: str
) -> tuple[str, list[Any]]:
    """The floor test (or, with no floor, the exact result), split on indexed values being empty.

    A row value matches a column with ``=`` when it is not empty, which an
    index can seek on; an empty one must match NULL or ``""``, which needs
    the slower form, so each gets its own subquery.
    """
    indexed_rows = [v for k, (tag, v) in gate.selector if tag == "row" and k in seek]
    if table != "rule_journal":  # a shape table stores absent values as "": plain equality
        return _subquery(gate, floor, table, empty_ok=False, coalesced=True)
    fast = _subquery(gate, floor, table, empty_ok=False)
    if not indexed_rows:
        return fast
    generic = _subquery(gate, floor, table, empty_ok=True)
    when = " AND ".join(f"COALESCE({_OUTER}.{c}, '') != ''" for c in indexed_rows)
    return f"(CASE WHEN {when} THEN {fast[0]} ELSE {generic[0]} END)", fast[1] + generic[1]


def _subquery(
    gate: Gate, floor: int | None, table: str, *, empty_ok: bool, coalesced: bool = False
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for key, (tag, value) in gate.selector:
        _check_key(key)
        col = f"{_J}{key}"
        if tag == "lit" and coalesced:
            clauses.append(f"{col} = ?")
            params.append(value)
            continue
        if tag == "lit":
            lit_clauses, lit_params = match_values({key: value}, _J)
            clauses += lit_clauses
            params += lit_params
            continue
        _check_key(value)
        outer = f"{_OUTER}.{value}"
        if coalesced:
            clauses.append(f"{col} = COALESCE({outer}, '')")
        elif empty_ok:
            clauses.append(
                f"({col} = {outer} OR (COALESCE({outer}, '') = '' AND COALESCE({col}, '') = ''))"
            )
        else:
            clauses.append(f"{col} = {outer}")
    clauses += [
        f"{_J}at > {_OUTER}.at - {int(gate.window_ms)}",
        f"{_J}at <= {_OUTER}.at",
        f"+{_J}seq <= {_OUTER}.seq",
    ]
    what = "1"
    if gate.fn == "distinct" and gate.field is not None:
        _check_key(gate.field)
        what = f"DISTINCT {_J}{gate.field}"
        clauses.append(f"{_J}{gate.field} IS NOT NULL AND {_J}{gate.field} != ''")
    where = " AND ".join(clauses)
    inner = f"SELECT {what} FROM {table} AS j WHERE {where}"
    if floor is None:  # the exact result, as the SQL host computes it
        if gate.fn == "exists":
            return f"EXISTS ({inner})", params
        return f"(SELECT count(*) FROM ({inner} LIMIT {SATURATION}))", params
    floor = int(floor)  # formatted into the SQL: never anything but an integer
    if what == "1":
        return f"EXISTS ({inner} LIMIT 1 OFFSET {floor - 1})", params
    # floor distinct values need floor rows: that test is cheap (no DISTINCT
    # b-tree) and turns most rows away before the distinct count runs.
    rows = f"SELECT 1 FROM {table} AS j WHERE {where}"
    return (
        f"(EXISTS ({rows} LIMIT 1 OFFSET {floor - 1})"
        f" AND (SELECT count(*) FROM ({inner} LIMIT {floor})) >= {floor})"
    ), params + params
