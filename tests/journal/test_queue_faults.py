"""The committer under store faults, in-process: what a client waiting for its rows is told.

The end-to-end scenarios (serve as a subprocess under load) are in
tests/serve/test_faults.py; these pin the queue's own rules: a ticket whose
client stopped waiting is never stored afterwards, a store that cannot even
be opened is retried, and only a corrupt one (seen on a fresh connection)
stops the writer, answering every waiting client instead of leaving it hanging.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.journal.errors import StoreUnavailable
from engine.journal.queue import JournalWriter, Ticket
from engine.journal.rows import row_from_mapping
from engine.journal.store_faults import store_error_is_fatal
from engine.store.db import connect

#: A bound that only a hang exceeds (the attempt's busy timeout is 1 s).
HANG_S = 15.0


def rows(n: int, run: str) -> list[tuple[object, ...]]:
    return [
        row_from_mapping(
            {"type": "tool_call", "harness": "q01", "run": run, "tool": "Bash", "n": i},
            with_at=False,
        )
        for i in range(n)
    ]


def stored(store: Path, run: str) -> int:
    conn = sqlite3.connect(store)
    try:
        return int(
            conn.execute("SELECT COUNT(*) FROM rule_journal WHERE run = ?", (run,)).fetchone()[0]
        )
    finally:
        conn.close()


def acknowledge_in_thread(writer: JournalWriter, ticket: Ticket, timeout: float) -> list[object]:
    """Run acknowledge on a thread; [seq] or [the exception]; fails the test if it hangs."""
    out: list[object] = []

    def wait() -> None:
        try:
            out.append(writer.acknowledge(ticket, timeout))
        except StoreUnavailable as exc:
            out.append(exc)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(HANG_S)
    assert not t.is_alive(), "acknowledge hangs"
    return out


def test_a_ticket_whose_client_gave_up_mid_attempt_is_withdrawn_not_retried(
    tmp_path: Path,
) -> None:
    store = tmp_path / "j.db"
    writer = JournalWriter(store, ticks=False)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with writer:
            ticket = writer.submit(rows(3, "r1"))
            [answer] = acknowledge_in_thread(writer, ticket, 0.1)
            assert isinstance(answer, StoreUnavailable)
            assert "database is locked" in str(answer)
            holder.execute("ROLLBACK")
            after = writer.submit(rows(2, "r2"))
            assert writer.acknowledge(after, HANG_S) > 0
        assert stored(store, "r1") == 0  # its client was told "not stored": never stored
        assert stored(store, "r2") == 2
        assert writer.stats().withdrawn == 3
    finally:
        holder.close()


def test_a_store_that_cannot_be_opened_is_retried_until_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vanished disk: opening fails ("unable to open") and is retried, not fatal."""
    import engine.journal.queue as queue

    store = tmp_path / "j.db"
    writer = JournalWriter(store, ticks=False)
    real = queue.connect
    failed: list[str] = []

    def vanished(path: Path, **kw: object) -> sqlite3.Connection:
        if len(failed) < 2:
            failed.append(str(path))
            try:
                raise sqlite3.OperationalError("unable to open database file")
            except sqlite3.OperationalError:
                raise InputError(f"{path}: cannot open or create the store here") from None
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(queue, "connect", vanished)
    with writer:
        ticket = writer.submit(rows(2, "r1"))
        assert writer.acknowledge(ticket, HANG_S) > 0
        assert writer.error is None and writer.failure is None
        assert writer.stats().failures == 2
    assert stored(store, "r1") == 2


def test_a_corrupt_store_stops_the_writer_and_answers_every_waiting_client(
    tmp_path: Path,
) -> None:
    store = tmp_path / "j.db"
    writer = JournalWriter(store, ticks=False)
    writer.start()
    first = writer.submit(rows(50, "r0"))
    writer.acknowledge(first, HANG_S)
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with open(store, "r+b") as fh:
        fh.seek(page)
        fh.write(os.urandom(page * (pages - 1)))
    tickets = [writer.submit(rows(2, f"r{k}")) for k in range(1, 4)]
    answers = [acknowledge_in_thread(writer, t, 5.0)[0] for t in tickets]
    assert all(isinstance(a, StoreUnavailable) for a in answers), answers
    assert writer.error is not None and store_error_is_fatal(writer.error)
    with pytest.raises(StoreUnavailable, match="journal writer stopped"):
        writer.submit(rows(1, "r9"))
    with pytest.raises(sqlite3.DatabaseError):
        writer.close()


def test_which_store_errors_are_fatal(tmp_path: Path) -> None:
    assert store_error_is_fatal(sqlite3.DatabaseError("database disk image is malformed"))
    assert store_error_is_fatal(sqlite3.DatabaseError("file is not a database"))
    for passing in (
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("database or disk is full"),
        sqlite3.OperationalError("disk I/O error"),
        sqlite3.OperationalError("attempt to write a readonly database"),
        OSError(5, "Input/output error"),
    ):
        assert not store_error_is_fatal(passing), passing
    bad = tmp_path / "not-a-store.db"
    bad.write_bytes(b"this is not an SQLite file at all" * 100)
    with pytest.raises(InputError) as caught:
        connect(bad)
    assert store_error_is_fatal(caught.value)  # judged by the SQLite error it translated
