"""Which process acts on a store: the console marks its header when ``harness serve`` does.

``harness serve`` takes the store lease with a holder name starting
``serve@``; while it holds a live lease the console's own evaluator only
follows, so its header should say who acts, or an operator would wonder why
the console's evaluator is idle.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.rules.lease import current_lease, wall_ms

SERVE_PREFIX = "serve@"
SERVE_MARK = " · serve acting"


def serve_acting(store: Path, now_ms: int | None = None) -> bool:
    """True while a ``harness serve`` holds a live lease on ``store`` (False on any error)."""
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute("PRAGMA busy_timeout = 200")
        info = current_lease(conn)
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    now = wall_ms() if now_ms is None else now_ms
    return info is not None and info.holder.startswith(SERVE_PREFIX) and not info.expired(now)


def mark_title(title: str, acting: bool) -> str:
    """``title`` with the serve mark added or removed."""
    base = title.removesuffix(SERVE_MARK)
    return base + SERVE_MARK if acting else base
