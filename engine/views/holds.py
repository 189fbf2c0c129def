"""Holds for the Holds pane and ``harness holds``: the listing, and the one way to release one.

The release is a view operation because two front ends do it (the console's
``x`` and ``harness holds release``): one write transaction, one record of
who released it (the login name) and why.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.rules.authority.holds import Hold

DEFAULT_RECENT_MS = 7 * 86_400_000


@dataclass(frozen=True, slots=True)
class HoldRow:
    """One hold. ``released_by`` is ``None`` while active, else the rule or operator."""

    id: int
    harness: str
    rule: str
    hash: str
    fire_id: int | None
    created_at: int
    reason: str
    released_at: int | None
    released_by: str | None
    release_reason: str | None

    @property
    def active(self) -> bool:
        return self.released_at is None


def list_holds(
    conn: sqlite3.Connection,
    *,
    now_ms: int | None = None,
    recent_ms: int = DEFAULT_RECENT_MS,
    limit: int = 500,
) -> list[HoldRow]:
    """Active holds first (newest first), then holds released within ``recent_ms``.

    "Recent" is measured against the later of wall clock and the newest
    release, so a replayed history still shows its releases.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    newest = conn.execute("SELECT COALESCE(MAX(released_at), 0) FROM rule_holds").fetchone()[0]
    cutoff = max(now, int(newest)) - recent_ms
    rows = conn.execute(
        "SELECT id, harness, rule, hash, fire_id, created_at, reason, released_at, released_by,"
        " release_reason FROM rule_holds WHERE released_at IS NULL OR released_at >= ?"
        " ORDER BY (released_at IS NOT NULL), COALESCE(released_at, created_at) DESC, id DESC"
        " LIMIT ?",
        (cutoff, limit),
    ).fetchall()
    return [
        HoldRow(
            id=int(r[0]),
            harness=str(r[1]),
            rule=str(r[2]),
            hash=str(r[3]),
            fire_id=None if r[4] is None else int(r[4]),
            created_at=int(r[5]),
            reason=str(r[6] or ""),
            released_at=None if r[7] is None else int(r[7]),
            released_by=None if r[8] is None else str(r[8]),
            release_reason=None if r[9] is None else str(r[9]),
        )
        for r in rows
    ]


def operator_name() -> str:
    """Who releases a hold by hand: the login name (``$USER``), else ``operator``.

    An identifier, as everything in the store is: the release records who
    released, so a fleet with several operators can tell.
    """
    import getpass

    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        return "operator"
    return name or "operator"


def release_hold(
    conn: sqlite3.Connection,
    hold_id: int,
    *,
    reason: str,
    who: str | None = None,
    now_ms: int | None = None,
) -> Hold:
    """Release a hold by hand in one write transaction (console ``x``, ``harness holds release``).

    Unknown or already released ids are input errors (named, never a
    traceback); the next tick of the acting evaluator sees the release.
    """
    from engine.rules.authority.holds import release_by_operator
    from engine.store.txn import immediate

    now = int(time.time() * 1000) if now_ms is None else now_ms
    with immediate(conn):
        return release_by_operator(
            conn,
            hold_id,
            reason=reason or "released by operator",
            now_ms=now,
            who=who or operator_name(),
        )
