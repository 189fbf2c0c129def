"""Helpers for the journal tests: a store in tmp and a settable clock."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from engine.store.db import connect

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


class FakeClock:
    """A clock tests move by hand (journal time is an input)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def store(tmp_path: Path, name: str = "j.db") -> tuple[Path, sqlite3.Connection]:
    path = tmp_path / name
    return path, connect(path)


def tool_call(harness: str = "h1", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_call", "harness": harness, "tool": "bash", **extra}


def all_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT * FROM rule_journal ORDER BY seq").fetchall()
