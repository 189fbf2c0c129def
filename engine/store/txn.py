"""Transactions, written once: `with immediate(conn):` locks, then commits or rolls back.

Why one module: every writer must take SQLite's write lock up front
(``BEGIN IMMEDIATE``, so reads inside see the state they then change), commit
only if the whole block succeeded, and roll back on any exception, including
``KeyboardInterrupt``, so that a crash never leaves half a batch behind.
Writing that by hand in ten places let some forget the ``in_transaction``
check; here it is written once, and tests/test_vocabulary.py fails when a
module elsewhere runs ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` itself.

- :func:`immediate`: one write transaction (most writers);
- :func:`immediate_unless_open`: the same, or join the caller's open one (the
  lease, renewed alone or inside the evaluator's batch);
- :func:`snapshot`: one read transaction, so several queries see one state;
- :func:`rollback`: abandon whatever is open (a connection dropped after a failure).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction on ``conn``.

    The block's exception (after the rollback) propagates unchanged; a failing
    ``COMMIT`` rolls back too. A store connection first takes its file's
    in-process write lock (see :class:`engine.store.db.StoreConnection`),
    waiting at most its busy timeout, then "database is locked" as SQLite says it.
    """
    lock = getattr(conn, "write_lock", None)
    if lock is not None and not lock.acquire(timeout=getattr(conn, "busy_ms", 0) / 1000):
        raise sqlite3.OperationalError("database is locked")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
    finally:
        if lock is not None:
            lock.release()


@contextmanager
def immediate_unless_open(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """:func:`immediate`, or the caller's transaction when one is open (it commits, not this)."""
    if conn.in_transaction:
        yield conn
        return
    with immediate(conn):
        yield conn


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block's reads in one (deferred) read transaction, ended however the block ends."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction on ``conn``, if there is one."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
