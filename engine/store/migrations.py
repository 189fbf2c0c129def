"""Ordered schema migrations, tracked by ``PRAGMA user_version``.

One global sequence: migration N runs once, in order, inside one transaction
that also bumps ``user_version`` to N, so a crash mid-migration leaves the
previous version intact. Each owning package keeps its SQL beside its code
(``engine.journal.schema``, ``engine.rules.schema``); this list only orders
them. Append, never edit, once a version has shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from engine.journal import schema as journal_schema
from engine.policy import schema as policy_schema
from engine.rules import lifecycle_schema
from engine.rules import schema as rules_schema

#: (version, name, SQL script). Versions are 1, 2, 3, … with no gaps.
MIGRATIONS: tuple[tuple[int, str, Callable[[], str]], ...] = (
    (1, "journal", lambda: journal_schema.SCHEMA_V1),
    (2, "rules", lambda: rules_schema.SCHEMA_V1),
    (3, "lifecycle", lambda: lifecycle_schema.SCHEMA_V1),
    (4, "proposals", lambda: policy_schema.SCHEMA_V1),
    (5, "prefilter index", lambda: journal_schema.SCHEMA_V5_PREFILTER),
)


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date; return the resulting version."""
    version = current_version(conn)
    latest = MIGRATIONS[-1][0]
    if version > latest:
        raise sqlite3.DatabaseError(
            f"store schema version {version} is newer than this program knows ({latest})"
        )
    for number, _name, sql in MIGRATIONS:
        if number <= version:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated.
            if current_version(conn) >= number:
                conn.execute("COMMIT")
                continue
            for statement in _statements(sql()):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return current_version(conn)


def _statements(script: str) -> list[str]:
    """Split a schema script on ``;`` (schema scripts hold no string literals with ';')."""
    return [s.strip() for s in script.split(";") if s.strip()]
