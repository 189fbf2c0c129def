"""Ordered schema migrations, tracked by ``PRAGMA user_version``, received by registration.

One global sequence: migration N runs once, in order, inside one transaction
that also bumps ``user_version`` to N, so a crash mid-migration leaves the
previous version intact. Each owning package keeps its SQL beside its code
(``engine.journal.schema``, ``engine.rules.evaluation.schema``, ...) and hands it to the
store with :func:`register_migration` when its schema module is imported; the
store never imports the packages above it. Whatever opens a store for the
full schema (the ``harness`` program, the console, the test suite) first
registers every package's migration and marks the set complete
(:func:`engine.views.store_schema.register_full_schema`); only then is a store
newer than the latest migration refused, because a process that registered
only its own package's schema cannot tell "newer" from "not registered here".
Such a process applies the steps it has, in order, up to the first one it
lacks, and otherwise uses the store as it is. Append, never edit, once a
version has shipped.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Final

from engine.record import Record


class Migration(Record):
    """One schema step: its version (1, 2, 3, … with no gaps), owner name and SQL script."""

    __slots__ = ("name", "sql", "version")
    __match_args__ = ("version", "name", "sql")

    def __init__(self, version: int, name: str, sql: str) -> None:
        self.version: Final = version
        self.name: Final = name
        self.sql: Final = sql


_LOCK = threading.Lock()
_REGISTERED: dict[int, Migration] = {}
#: The program's latest version once the full schema is registered (see module docstring).
_COMPLETE: list[int] = []


class MigrationError(RuntimeError):
    """A programming error in how migrations were registered (never a user's bad input)."""


def register_migration(version: int, name: str, sql: str) -> Migration:
    """Hand one owning package's schema step to the store; registering it again is a no-op.

    Two different steps for the same version are refused: a shipped version
    must never change meaning.
    """
    if version < 1:
        raise MigrationError(f"migration versions start at 1, got {version}")
    migration = Migration(version, name, sql)
    with _LOCK:
        known = _REGISTERED.get(version)
        if known is not None and known != migration:
            raise MigrationError(
                f"migration {version} is already registered as {known.name!r}; "
                f"refusing a different one ({name!r})"
            )
        _REGISTERED[version] = migration
    return migration


def mark_complete() -> int:
    """Declare that every migration of this program is registered; return the latest version.

    Refuses a registry with a gap, since the full schema runs 1, 2, 3, … with none.
    """
    ordered = registered()
    for expected, migration in enumerate(ordered, start=1):
        if migration.version != expected:
            raise MigrationError(
                f"migration {expected} is not registered (have "
                f"{', '.join(str(m.version) for m in ordered)})"
            )
    if not ordered:
        raise MigrationError("no migration is registered")
    with _LOCK:
        _COMPLETE[:] = [ordered[-1].version]
    return ordered[-1].version


def registered() -> tuple[Migration, ...]:
    """The registered migrations in version order."""
    with _LOCK:
        return tuple(_REGISTERED[v] for v in sorted(_REGISTERED))


def known_latest() -> int | None:
    """The latest version when the full schema is registered, else None."""
    with _LOCK:
        return _COMPLETE[0] if _COMPLETE else None


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, migrations: tuple[Migration, ...] | None = None) -> int:
    """Bring the schema up to date; return the resulting version.

    ``migrations`` defaults to the registered ones; given explicitly, they are
    taken as the complete list (tests build stores at an older version this
    way). Steps run in order from the store's version up to the first missing
    one. A new, empty store with nothing registered is a programming error,
    not an empty store.
    """
    if migrations is None:
        steps, latest = registered(), known_latest()
    else:
        steps, latest = migrations, (migrations[-1].version if migrations else None)
    version = current_version(conn)
    if latest is not None and version > latest:
        raise sqlite3.DatabaseError(
            f"store schema version {version} is newer than this program knows ({latest})"
        )
    if not steps and version == 0:
        raise MigrationError(
            "no schema migration is registered: register the owning packages' schemas "
            "(engine.views.store_schema.register_full_schema) before creating a store"
        )
    by_version = {step.version: step for step in steps}
    number = version + 1
    if number in by_version:
        # here, not at the top: a hook call on a migrated store never loads it
        from engine.store.txn import immediate
    while number in by_version:
        with immediate(conn):
            # Re-check under the write lock: another process may have migrated.
            if current_version(conn) < number:
                for statement in _statements(by_version[number].sql):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
        number = max(number, current_version(conn)) + 1
    return current_version(conn)


def _statements(script: str) -> list[str]:
    """Split a schema script on ``;`` (schema scripts hold no string literals with ';')."""
    return [s.strip() for s in script.split(";") if s.strip()]
