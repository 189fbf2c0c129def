"""Who acts on a store: the console's header line ("serve@host:pid acting, rules sha256:…").

Nobody acts by surprise (DESIGN, "The gate's guarantees" 5): only ``harness
serve``, ``harness evaluate`` and a console started with ``--act`` take the
store lease, and the lease row records the holder's role and the digest of
the rule set it acts with (``engine.rules.authority.lease``). This view reads that row
(read-only, so a watching console never writes) and says it in one line, or
"nobody is acting" with the rows waiting for an actor: those are evaluated
from the live cursor when one returns.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from engine.rules.authority.lease import SERVE, current_lease, wall_ms

#: Hex digits of a rule-set digest shown in the header (the rest is marked cut).
DIGEST_DIGITS = 12


def short_digest(digest: str | None) -> str:
    """``sha256:0123456789ab…``: a digest shortened visibly, never silently."""
    if not digest:
        return "not recorded"
    kind, _, hexdigits = digest.partition(":")
    if not hexdigits:
        return digest
    return f"{kind}:{hexdigits[:DIGEST_DIGITS]}…" if len(hexdigits) > DIGEST_DIGITS else digest


@dataclass(frozen=True, slots=True)
class Acting:
    """Who holds a live lease on the store (``who`` None: nobody), and what waits."""

    #: ``role@host:pid`` of the holder, None when nobody holds a live lease.
    who: str | None = None
    role: str | None = None
    ruleset: str | None = None
    #: The holder is this process (a console started with ``--act``).
    mine: bool = False
    #: Journal rows after the live cursor: not evaluated yet.
    waiting: int = 0

    def line(self) -> str:
        """The header's words for it."""
        if self.who is None:
            wait = f" · {self.waiting:,} rows wait for an actor" if self.waiting else ""
            return "nobody is acting" + wait
        me = " (this console)" if self.mine else ""
        return f"{self.who}{me} acting, rules {short_digest(self.ruleset)}"


def who_acts(conn: sqlite3.Connection, now_ms: int | None = None) -> Acting:
    """Read the lease and the backlog on ``conn`` (a live lease only; an expired one is nobody)."""
    now = wall_ms() if now_ms is None else now_ms
    info = current_lease(conn)
    head = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rule_journal").fetchone()
    cursor = conn.execute("SELECT seq FROM rule_cursor WHERE name = 'live'").fetchone()
    waiting = max(0, int(head[0]) - (int(cursor[0]) if cursor else 0))
    if info is None or info.expired(now):
        return Acting(waiting=waiting)
    return Acting(
        who=info.who,
        role=info.role,
        ruleset=info.ruleset,
        mine=info.pid == os.getpid(),
        waiting=waiting,
    )


def acting_on(store: Path, now_ms: int | None = None) -> Acting | None:
    """:func:`who_acts` on a read-only connection to ``store``; None when it cannot be read."""
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA busy_timeout = 200")
        return who_acts(conn, now_ms)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def serve_acting(store: Path, now_ms: int | None = None) -> bool:
    """True while a ``harness serve`` holds a live lease on ``store`` (False on any error)."""
    acting = acting_on(store, now_ms)
    return acting is not None and acting.role == SERVE
