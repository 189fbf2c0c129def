"""Paged, filtered access to ``rule_fires``: the Fires pane never loads them all.

A store may hold millions of fires. Every query here is keyset-paged on the
primary key (``id``), so a page costs the same at the top and at the bottom of
the history and memory stays bounded by the page size, whatever the store holds.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.errors import Diagnostic, InputError, Location
from engine.timefmt import compact_ms
from engine.vocab import LEVELS as LEVELS  # the console draws each level word

#: Filter keys the `/` box accepts (``rule:NAME level:hold status:shadow harness:h1``).
FILTER_KEYS = ("rule", "level", "status", "harness")
#: Columns a bare word is looked for in (as a case-insensitive substring).
TEXT_COLUMNS = ("f.rule", "f.target", "f.status")

_COLUMNS = (
    "f.id, f.rule, f.hash, f.seq, f.at, f.target, f.level, f.effective_level,"
    " f.status, f.reasons, f.calls"
)


@dataclass(frozen=True, slots=True)
class FireFilter:
    """Equality filters by key, plus bare words; ``None``/empty means any.

    ``harness`` matches the fire's target or the harness of the event it fired on.
    Each of ``words`` must occur (case-insensitively) in the rule, target,
    status or the event's harness: an operator rarely remembers a rule's exact name.
    """

    rule: str | None = None
    level: str | None = None
    status: str | None = None
    harness: str | None = None
    words: tuple[str, ...] = ()
    #: A journal-time range ``[at_from, at_to)`` in ms (set by the Timeline pane).
    at_from: int | None = None
    at_to: int | None = None

    @property
    def empty(self) -> bool:
        return not (
            self.rule or self.level or self.status or self.harness or self.words or self.timed
        )

    @property
    def timed(self) -> bool:
        return self.at_from is not None or self.at_to is not None

    def describe(self) -> str:
        parts = [f"{k}:{v}" for k in FILTER_KEYS if (v := getattr(self, k))]
        parts.extend(shlex.quote(w) for w in self.words)
        if self.timed:
            parts.append(f"at:{_hm(self.at_from)}..{_hm(self.at_to)}")
        return " ".join(parts)


def _hm(ms: int | None) -> str:
    if ms is None:
        return ""
    return compact_ms(ms)


@dataclass(frozen=True, slots=True)
class FireRow:
    """One stored fire, as the console lists it. ``reasons``/``calls`` stay JSON text."""

    id: int
    rule: str
    hash: str
    seq: int
    at: int
    target: str | None
    level: str
    effective_level: str
    status: str
    reasons: str
    calls: str

    def to_json(self) -> dict[str, Any]:
        """The fire as a JSON object (what "copy as JSON" puts on the clipboard)."""
        return {
            "id": self.id,
            "rule": self.rule,
            "hash": self.hash,
            "seq": self.seq,
            "at": self.at,
            "target": self.target,
            "level": self.level,
            "effective_level": self.effective_level,
            "status": self.status,
            "reasons": _maybe_json(self.reasons),
            "calls": _maybe_json(self.calls),
        }


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def parse_filter(text: str) -> FireFilter:
    """Parse the filter box: ``key:value`` words match exactly; a bare word is a substring.

    An unknown key is an :class:`InputError` naming the column, so a typo never
    silently filters nothing.
    """
    values: dict[str, Any] = {}
    bare: list[str] = []
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InputError(f"filter: {exc}", title="Bad filter") from None
    col = 1
    for word in words:
        key, sep, value = word.partition(":")
        if not sep:
            bare.append(word)
            continue
        key = key.strip().lower()
        if key not in FILTER_KEYS:
            col = text.find(word) + 1
            msg = f"unknown filter key `{key}` (use {', '.join(FILTER_KEYS)})"
            raise InputError(
                f"filter:1:{col}: {msg}",
                title="Bad filter",
                diagnostics=[Diagnostic(msg, Location("filter", 1, col), path=key)],
            )
        if not value:
            raise InputError(f"filter: `{key}:` needs a value", title="Bad filter")
        values[key] = value
    return FireFilter(**values, words=tuple(bare))


def _where(flt: FireFilter) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for key in ("rule", "level", "status"):
        value = getattr(flt, key)
        if value:
            column = "effective_level" if key == "level" else key
            clauses.append(f"f.{column} = ?")
            params.append(value)
    if flt.harness:
        clauses.append(
            "(f.target = ? OR EXISTS (SELECT 1 FROM rule_journal j"
            " WHERE j.seq = f.seq AND j.harness = ?))"
        )
        params.extend([flt.harness, flt.harness])
    if flt.at_from is not None:
        clauses.append("f.at >= ?")
        params.append(flt.at_from)
    if flt.at_to is not None:
        clauses.append("f.at < ?")
        params.append(flt.at_to)
    for word in flt.words:
        needle = word.lower()
        found = [f"instr(lower(COALESCE({c}, '')), ?) > 0" for c in TEXT_COLUMNS]
        found.append(
            "EXISTS (SELECT 1 FROM rule_journal j WHERE j.seq = f.seq"
            " AND instr(lower(COALESCE(j.harness, '')), ?) > 0)"
        )
        clauses.append("(" + " OR ".join(found) + ")")
        params.extend([needle] * len(found))
    return clauses, params


def after_query(flt: FireFilter, after_id: int, limit: int) -> tuple[str, list[Any]]:
    """SQL for fires with ``id > after_id`` in id order (the live tail's poll)."""
    clauses, params = _where(flt)
    clauses.insert(0, "f.id > ?")
    params.insert(0, after_id)
    sql = f"SELECT {_COLUMNS} FROM rule_fires f WHERE {' AND '.join(clauses)} ORDER BY f.id LIMIT ?"
    return sql, [*params, limit]


def before_query(flt: FireFilter, before_id: int | None, limit: int) -> tuple[str, list[Any]]:
    """SQL for the ``limit`` newest fires with ``id < before_id``, newest first."""
    clauses, params = _where(flt)
    if before_id is not None:
        clauses.insert(0, "f.id < ?")
        params.insert(0, before_id)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    sql = f"SELECT {_COLUMNS} FROM rule_fires f{where} ORDER BY f.id DESC LIMIT ?"
    return sql, [*params, limit]


def count_after_query(flt: FireFilter, after_id: int) -> tuple[str, list[Any]]:
    """SQL counting matching fires newer than ``after_id`` (the "N new" badge)."""
    clauses, params = _where(flt)
    clauses.insert(0, "f.id > ?")
    params.insert(0, after_id)
    return f"SELECT COUNT(*) FROM rule_fires f WHERE {' AND '.join(clauses)}", params


def row_from_tuple(row: tuple[Any, ...] | sqlite3.Row) -> FireRow:
    return FireRow(
        id=int(row[0]),
        rule=str(row[1]),
        hash=str(row[2]),
        seq=int(row[3]),
        at=int(row[4]),
        target=None if row[5] is None else str(row[5]),
        level=str(row[6]),
        effective_level=str(row[7]),
        status=str(row[8]),
        reasons=str(row[9]),
        calls=str(row[10]),
    )


def fires_after(
    conn: sqlite3.Connection, flt: FireFilter, after_id: int, limit: int = 500
) -> list[FireRow]:
    """Matching fires newer than ``after_id``, oldest first."""
    sql, params = after_query(flt, after_id, limit)
    return [row_from_tuple(r) for r in conn.execute(sql, params)]


def fires_before(
    conn: sqlite3.Connection, flt: FireFilter, before_id: int | None, limit: int = 200
) -> list[FireRow]:
    """The ``limit`` matching fires just older than ``before_id``, returned oldest first."""
    sql, params = before_query(flt, before_id, limit)
    rows = [row_from_tuple(r) for r in conn.execute(sql, params)]
    rows.reverse()
    return rows


def count_after(conn: sqlite3.Connection, flt: FireFilter, after_id: int) -> int:
    sql, params = count_after_query(flt, after_id)
    return int(conn.execute(sql, params).fetchone()[0])


def fire_by_id(conn: sqlite3.Connection, fire_id: int) -> FireRow | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM rule_fires f WHERE f.id = ?", (fire_id,)).fetchone()
    return None if row is None else row_from_tuple(row)


def latest_fire_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM rule_fires").fetchone()[0])
