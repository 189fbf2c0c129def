"""One write-transaction helper: `with immediate(conn):` locks, then commits or rolls back.

Why one helper: every writer must take SQLite's write lock up front
(``BEGIN IMMEDIATE``, so reads inside see the state they then change), commit
only if the whole block succeeded, and roll back on any exception, including
``KeyboardInterrupt``, so that a crash never leaves half a batch behind.
Writing that by hand in ten places let some forget the ``in_transaction``
check; here it is written once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction on ``conn``.

    The block's exception (after the rollback) propagates unchanged; a failing
    ``COMMIT`` rolls back too.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
