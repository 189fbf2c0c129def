"""Threads of one process take turns at a store's write lock in-process, with SQLite's timeout."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from engine.store.db import connect, set_busy_timeout
from engine.store.txn import immediate


def _count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM journal_counters").fetchone()[0])
    finally:
        conn.close()


def _holding(conn: sqlite3.Connection, started: threading.Event, release: threading.Event) -> None:
    with immediate(conn):
        conn.execute("INSERT INTO journal_counters (name, value) VALUES ('held', 1)")
        started.set()
        release.wait(10)


def test_a_second_writer_waits_for_the_first_and_then_writes(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    first = connect(store, check_same_thread=False)
    second = connect(store, check_same_thread=False)
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_holding, args=(first, started, release))
    holder.start()
    assert started.wait(10)
    done = threading.Event()

    def write() -> None:
        with immediate(second):
            second.execute("INSERT INTO journal_counters (name, value) VALUES ('after', 1)")
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not done.wait(0.3)  # it waits while the first holds the lock
    release.set()
    holder.join(10)
    writer.join(10)
    assert done.is_set() and _count(store) == 2


def test_the_wait_ends_at_the_busy_timeout_as_sqlite_would(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    first = connect(store, check_same_thread=False)
    second = connect(store, check_same_thread=False)
    set_busy_timeout(second, 100)
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_holding, args=(first, started, release))
    holder.start()
    try:
        assert started.wait(10)
        with (
            pytest.raises(sqlite3.OperationalError, match="database is locked"),
            immediate(second),
        ):
            second.execute("INSERT INTO journal_counters (name, value) VALUES ('no', 1)")
        assert not second.in_transaction
    finally:
        release.set()
        holder.join(10)
    assert _count(store) == 1  # the refused block wrote nothing
    with immediate(second):  # and the lock is free again afterwards
        second.execute("INSERT INTO journal_counters (name, value) VALUES ('yes', 1)")
    assert _count(store) == 2


def test_one_lock_per_file_whatever_its_spelling(tmp_path: Path) -> None:
    store, other = tmp_path / "j.db", tmp_path / "k.db"
    (tmp_path / "link").symlink_to(tmp_path)
    same = connect(tmp_path / "link" / "j.db")
    assert connect(store).write_lock is same.write_lock  # type: ignore[attr-defined]
    elsewhere = connect(other)
    set_busy_timeout(elsewhere, 0)
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_holding, args=(connect(store, check_same_thread=False), started, release)
    )
    holder.start()
    try:
        assert started.wait(10)
        with immediate(elsewhere):  # another store's writer never waits for this one
            elsewhere.execute("INSERT INTO journal_counters (name, value) VALUES ('free', 1)")
    finally:
        release.set()
        holder.join(10)


def test_another_process_still_meets_sqlites_lock(tmp_path: Path) -> None:
    """A plain connection (as another process's would be) is refused by SQLite's lock."""
    store = tmp_path / "j.db"
    ours = connect(store, check_same_thread=False)
    foreign = sqlite3.connect(store, isolation_level=None, timeout=0.05)
    started, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_holding, args=(ours, started, release))
    holder.start()
    try:
        assert started.wait(10)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            foreign.execute("BEGIN IMMEDIATE")
    finally:
        release.set()
        holder.join(10)
