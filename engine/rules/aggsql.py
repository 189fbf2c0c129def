"""The primitives' window semantics as SQL on the journal's indexes (on demand and as gates).

Why one module: the SQL host (:mod:`engine.rules.host_sql`) asks a primitive
with bound values, and a backtest tests a rule's gates (:mod:`engine.rules.gates`)
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
from typing import Any

from engine.rules.gates import Gate
from engine.rules.model import SELECTOR_KEYS

_ALLOWED = frozenset(SELECTOR_KEYS)

#: Journal indexes that lead with selector columns and end in ``at``: the keys
#: they seek on, best first (see :func:`index_keys`).
WINDOW_INDEXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rule_journal_harness_type", ("harness", "type")),
    ("rule_journal_harness_at", ("harness",)),
    ("rule_journal_type_at", ("type",)),
)


def journal_indexes(conn: sqlite3.Connection) -> frozenset[str]:
    """Names of the indexes the store has on ``rule_journal`` (older stores lack some)."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'rule_journal'"
    )
    return frozenset(str(r[0]) for r in rows)


def index_keys(keys: Iterable[str], available: frozenset[str]) -> tuple[str, ...] | None:
    """The selector keys an index can seek on before its ``at`` range; None when none can.

    Without such an index a window query reads the whole journal: such
    aggregates are left to the window index.
    """
    present = set(keys)
    for name, cols in WINDOW_INDEXES:
        if name in available and present.issuperset(cols):
            return cols
    return None


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


def gate_predicate(gate: Gate, available: frozenset[str]) -> tuple[str, list[Any]] | None:
    """SQL true for a candidate row (table ``rule_journal``) only if ``gate`` can pass there.

    It asks whether the ``floor``-th matching row exists (``EXISTS (… LIMIT 1
    OFFSET floor-1)``), so SQLite stops there. For ``distinct`` it counts the
    distinct values of a subquery limited to ``floor`` instead: SQLite drops a
    ``DISTINCT`` inside ``EXISTS``, which would count repeated values. None
    when the gate has no floor or no index serves it.
    """
    floor = gate.floor
    seek = index_keys(gate.keys, available)
    if floor is None or seek is None:
        return None
    if gate.never:
        return "0", []
    return _exists(gate, floor, gate.selector, seek)


def _exists(
    gate: Gate, floor: int, selector: tuple[tuple[str, tuple[str, str]], ...], seek: tuple[str, ...]
) -> tuple[str, list[Any]]:
    """At least ``floor`` matching rows (or values); indexed row values split on being empty."""
    indexed_rows = [v for k, (tag, v) in selector if tag == "row" and k in seek]
    fast = _subquery(gate, floor, selector, empty_ok=False)
    if not indexed_rows:
        return fast
    generic = _subquery(gate, floor, selector, empty_ok=True)
    when = " AND ".join(f"COALESCE({_OUTER}.{c}, '') != ''" for c in indexed_rows)
    return f"(CASE WHEN {when} THEN {fast[0]} ELSE {generic[0]} END)", fast[1] + generic[1]


def _subquery(
    gate: Gate, floor: int, selector: tuple[tuple[str, tuple[str, str]], ...], *, empty_ok: bool
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for key, (tag, value) in selector:
        _check_key(key)
        col = f"{_J}{key}"
        if tag == "lit":
            lit_clauses, lit_params = match_values({key: value}, _J)
            clauses += lit_clauses
            params += lit_params
            continue
        _check_key(value)
        outer = f"{_OUTER}.{value}"
        if empty_ok:
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
    floor = int(floor)  # formatted into the SQL: never anything but an integer
    if what == "1":
        sql = f"EXISTS (SELECT 1 FROM rule_journal AS j WHERE {where} LIMIT 1 OFFSET {floor - 1})"
    else:
        sql = (
            f"((SELECT count(*) FROM (SELECT {what} FROM rule_journal AS j WHERE {where}"
            f" LIMIT {floor})) >= {floor})"
        )
    return sql, params
