"""The console's header mark: serve holds the lease -> "serve acting"; anyone else -> nothing."""

from __future__ import annotations

from pathlib import Path

from engine.rules.lease import Lease
from engine.store.db import connect
from engine.views.acting import SERVE_MARK, mark_title, serve_acting


def test_serve_acting_follows_the_lease_holder(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    conn = connect(store)
    assert serve_acting(store) is False
    lease = Lease(conn, holder="serve@host:1:abc", clock=lambda: 1_000)
    assert lease.try_acquire()
    assert serve_acting(store, now_ms=2_000) is True
    assert serve_acting(store, now_ms=1_000 + lease.ttl_ms) is False  # expired
    lease.release()
    other = Lease(conn, holder="host:2:console", clock=lambda: 1_000)
    assert other.try_acquire()
    assert serve_acting(store, now_ms=2_000) is False
    conn.close()
    assert serve_acting(tmp_path / "missing.db") is False


def test_mark_title_adds_and_removes_once() -> None:
    title = mark_title("store.db", True)
    assert title == "store.db" + SERVE_MARK
    assert mark_title(title, True) == title
    assert mark_title(title, False) == "store.db"
