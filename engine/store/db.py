"""Opening the store the same way everywhere.

WAL lets readers (the console, ``journal tail``, a following evaluator) read
committed rows while the committer writes; ``busy_timeout`` makes a second
writer process wait for the lock instead of failing. Every opener goes through
:func:`connect` so those settings and the migrations are never forgotten.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.errors import Diagnostic, InputError, Location
from engine.store.migrations import migrate

BUSY_TIMEOUT_MS = 10_000


def connect(
    path: str | Path, *, readonly: bool = False, check_same_thread: bool = True
) -> sqlite3.Connection:
    """Open (creating if needed, unless ``readonly``) and migrate the store at ``path``."""
    target = Path(path).expanduser()
    try:
        if readonly:
            if not target.exists():
                hint = f"run `harness demo --store {target}` or start writing"
                raise InputError(
                    f"{target}: no store here ({hint})",
                    title="No store",
                    diagnostics=[Diagnostic("no store here", Location(str(target)), hint=hint)],
                )
            conn = sqlite3.connect(
                f"file:{target}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(target), isolation_level=None, check_same_thread=check_same_thread
            )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn)
        return conn
    except sqlite3.DatabaseError as exc:
        raise InputError(
            f"{target}: not a usable store: {exc}",
            title="Bad store",
            diagnostics=[Diagnostic(f"not a usable store: {exc}", Location(str(target)))],
        ) from None
