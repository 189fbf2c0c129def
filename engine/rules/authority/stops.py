"""Run stops (migration 5): which run a stop-level fire stopped, so a gate can refuse it.

A hold outlives runs (it refuses new runs of a harness until released); a stop
names one run, the one whose row the rule fired on, and every later call of
that run is refused while a new run starts free. The fire row alone does not
say which run it stopped (its event row may be pruned long before the stop
stops mattering), so the stop is written here, in the fire's transaction, by
:class:`engine.rules.authority.lifecycle.LifecycleHooks`. The loop guard's stops are
its ``loop_stopped`` journal rows, which carry the run already.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from engine.record import Record
from engine.store.migrations import register_migration

SCHEMA_V1 = """
CREATE TABLE run_stops (
    id INTEGER PRIMARY KEY,
    harness TEXT NOT NULL,
    run TEXT NOT NULL,
    rule TEXT NOT NULL,
    fire_id INTEGER,
    event_seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX run_stops_harness_run ON run_stops (harness, run)
"""

MIGRATION = register_migration(5, "run_stops", SCHEMA_V1)


class RunStop(Record):
    """One stopped run and why. ``rule`` is ``loop_guard`` for the loop guard's stops."""

    __slots__ = ("event_seq", "fire_id", "harness", "reason", "rule", "run")
    __match_args__ = ("harness", "run", "rule", "fire_id", "event_seq", "reason")

    def __init__(
        self, harness: str, run: str, rule: str, fire_id: int | None, event_seq: int, reason: str
    ) -> None:
        self.harness: Final = harness
        self.run: Final = run
        self.rule: Final = rule
        self.fire_id: Final = fire_id
        self.event_seq: Final = event_seq
        self.reason: Final = reason


def record_stop(
    conn: sqlite3.Connection,
    *,
    harness: str,
    run: str,
    rule: str,
    fire_id: int | None,
    event_seq: int,
    at: int,
    reason: str,
) -> None:
    """Insert a stop (inside the fire's transaction); one per (harness, run, rule)."""
    exists = conn.execute(
        "SELECT 1 FROM run_stops WHERE harness = ? AND run = ? AND rule = ? LIMIT 1",
        (harness, run, rule),
    ).fetchone()
    if exists is None:
        conn.execute(
            "INSERT INTO run_stops (harness, run, rule, fire_id, event_seq, created_at, reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (harness, run, rule, fire_id, event_seq, at, reason),
        )


def stop_for_run(conn: sqlite3.Connection, harness: str, run: str) -> RunStop | None:
    """The first stop of this run: a rule's stop, else a loop-guard trip in the journal."""
    row = conn.execute(
        "SELECT rule, fire_id, event_seq, reason FROM run_stops "
        "WHERE harness = ? AND run = ? ORDER BY id LIMIT 1",
        (harness, run),
    ).fetchone()
    if row is not None:
        return RunStop(harness, run, str(row[0]), row[1], int(row[2]), str(row[3]))
    trip = conn.execute(
        "SELECT seq, tool, n FROM rule_journal WHERE harness = ? AND type = 'loop_stopped' "
        "AND run = ? ORDER BY seq LIMIT 1",
        (harness, run),
    ).fetchone()
    if trip is not None:
        return RunStop(
            harness, run, "loop_guard", None, int(trip[0]), loop_reason(trip[1], trip[2])
        )
    return None


def loop_reason(tool: object, n: object) -> str:
    """The loop guard's stop reason (identifiers and counts only)."""
    count = f"{n} " if isinstance(n, int) else ""
    what = f"{tool} " if isinstance(tool, str) else ""
    return f"{count}identical {what}calls in an unbroken streak"
