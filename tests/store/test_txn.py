"""engine/store/txn.py: the only place a transaction begins or ends (issue 20)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.store.txn import immediate, immediate_unless_open, rollback, snapshot


def _conn(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    return conn


def _values(conn: sqlite3.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT v FROM t ORDER BY v")]


def test_immediate_commits_the_block_and_rolls_back_on_any_exception(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "s.db")
    with immediate(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(KeyboardInterrupt), immediate(conn):
        conn.execute("INSERT INTO t VALUES (2)")
        raise KeyboardInterrupt
    assert not conn.in_transaction
    assert _values(conn) == [1]


def test_immediate_unless_open_joins_the_callers_transaction(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "s.db")
    conn.execute("BEGIN IMMEDIATE")
    with immediate_unless_open(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    assert conn.in_transaction  # the caller's transaction: not committed here
    conn.execute("ROLLBACK")
    assert _values(conn) == []
    with immediate_unless_open(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert not conn.in_transaction
    assert _values(_conn(tmp_path / "s.db")) == [2]


def test_an_error_in_a_joined_block_leaves_the_callers_transaction_to_the_caller(
    tmp_path: Path,
) -> None:
    conn = _conn(tmp_path / "s.db")
    conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(ValueError), immediate_unless_open(conn):
        raise ValueError
    assert conn.in_transaction
    rollback(conn)
    assert not conn.in_transaction
    rollback(conn)  # nothing open: nothing to do


def test_snapshot_reads_one_state_while_another_connection_writes(tmp_path: Path) -> None:
    reader, writer = _conn(tmp_path / "s.db"), _conn(tmp_path / "s.db")
    writer.execute("INSERT INTO t VALUES (1)")
    with snapshot(reader):
        assert _values(reader) == [1]
        writer.execute("INSERT INTO t VALUES (2)")
        assert _values(reader) == [1]
    assert not reader.in_transaction
    assert _values(reader) == [1, 2]
