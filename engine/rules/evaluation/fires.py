"""Fires: what a match became, stored with everything explain needs to justify it.

A fire carries the rule version (hash), the row (seq, at), the target, the
written and effective level with reasons, and each primitive call's arguments
and result. The same :class:`Fire` value is produced by live evaluation and by
a backtest, and :meth:`Fire.key` is what the equivalence test compares.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.language.model import CallRecord


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire. ``id`` is None until stored (and always None in a backtest)."""

    rule: str
    hash: str
    seq: int
    at: int
    target: str
    level: str
    effective_level: str
    status: str
    reasons: tuple[str, ...]
    calls: tuple[CallRecord, ...]
    cost: int = 0
    id: int | None = None

    def key(self) -> tuple[Any, ...]:
        """The facts live and backtest must agree on: seq, rule, hash, target, level, results."""
        return (
            self.seq,
            self.rule,
            self.hash,
            self.target,
            self.level,
            tuple((c.fn, c.field, c.selector, c.window_ms, c.result) for c in self.calls),
        )

    def results(self) -> tuple[int | bool, ...]:
        return tuple(c.result for c in self.calls)

    def to_json(self) -> dict[str, Any]:
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
            "reasons": list(self.reasons),
            "calls": calls_to_json(self.calls),
            "cost": self.cost,
        }


def calls_to_json(calls: Iterable[CallRecord]) -> list[dict[str, Any]]:
    return [
        {
            "fn": c.fn,
            "field": c.field,
            "selector": dict(c.selector),
            "window_ms": c.window_ms,
            "result": c.result,
        }
        for c in calls
    ]


def calls_from_json(text: str) -> tuple[CallRecord, ...]:
    out = []
    for item in json.loads(text):
        result = item["result"]
        out.append(
            CallRecord(
                fn=str(item["fn"]),
                field=item.get("field"),
                selector=tuple((str(k), str(v)) for k, v in item["selector"].items()),
                window_ms=int(item["window_ms"]),
                result=result if isinstance(result, bool) else int(result),
            )
        )
    return tuple(out)


_INSERT = (
    "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level, status,"
    " reasons, calls, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = (
    "SELECT id, rule, hash, seq, at, target, level, effective_level, status, reasons, calls,"
    " cost FROM rule_fires"
)


def insert_fires(conn: sqlite3.Connection, fires: Sequence[Fire]) -> list[Fire]:
    """Insert fires (inside the caller's transaction); return them with their ids."""
    stored = []
    for f in fires:
        cur = conn.execute(
            _INSERT,
            (
                f.rule,
                f.hash,
                f.seq,
                f.at,
                f.target,
                f.level,
                f.effective_level,
                f.status,
                json.dumps(list(f.reasons)),
                json.dumps(calls_to_json(f.calls)),
                f.cost,
            ),
        )
        stored.append(_with_id(f, int(cur.lastrowid or 0)))
    return stored


def _with_id(f: Fire, fire_id: int) -> Fire:
    return Fire(
        f.rule,
        f.hash,
        f.seq,
        f.at,
        f.target,
        f.level,
        f.effective_level,
        f.status,
        f.reasons,
        f.calls,
        f.cost,
        fire_id,
    )


def _from_row(r: Sequence[Any]) -> Fire:
    return Fire(
        rule=r[1],
        hash=r[2],
        seq=int(r[3]),
        at=int(r[4]),
        target=r[5] or "",
        level=r[6],
        effective_level=r[7],
        status=r[8],
        reasons=tuple(json.loads(r[9])),
        calls=calls_from_json(r[10]),
        cost=int(r[11] or 0),
        id=int(r[0]),
    )


def get_fire(conn: sqlite3.Connection, fire_id: int) -> Fire | None:
    row = conn.execute(_SELECT + " WHERE id = ?", (fire_id,)).fetchone()
    return _from_row(row) if row else None


def list_fires(
    conn: sqlite3.Connection,
    *,
    rule: str | None = None,
    after_id: int = 0,
    limit: int | None = None,
    seq_range: tuple[int, int] | None = None,
) -> list[Fire]:
    """Stored fires in seq order (then rule), optionally one rule's, after an id, in a seq range."""
    sql = _SELECT + " WHERE id > ?"
    params: list[Any] = [after_id]
    if rule is not None:
        sql += " AND rule = ?"
        params.append(rule)
    if seq_range is not None:
        sql += " AND seq BETWEEN ? AND ?"
        params.extend(seq_range)
    sql += " ORDER BY seq, rule"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_from_row(r) for r in conn.execute(sql, params)]
