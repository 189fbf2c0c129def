"""The command hook's ports: one direct transaction, and the store's own evaluator cursor.

``harness hook <agent>`` runs once per tool call, with no serve to queue its
rows or to tell it what the evaluator has seen. So its journal commits the
rows at once (that commit is the acknowledgement) and its gate reads the
acting evaluator's progress from the store: it waits, at most ``[serve]
gate_wait``, until the live cursor has reached the store's last seq, then
reads holds and stops. When nobody holds the evaluator lease there is nobody
to wait for: it answers from what the store says and counts the answer late.

Nothing here imports the writer's queue, CEL or the evaluator: the module is
on the per-call path.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence

from engine.journal.errors import StoreUnavailable
from engine.journal.rows import InsertRow
from engine.rules.evaluation.schema import LIVE_CURSOR
from engine.serve.ports import GateState, GateUnavailable, read_state

#: How often the gate looks at the cursor while it waits.
POLL_S = 0.002


class DirectJournal:
    """Commits each request's rows now, in one transaction (the commit is the acknowledgement)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def submit(self, rows: Sequence[InsertRow]) -> object:
        from engine.journal.writer import Committer

        try:
            return Committer(self.conn).commit_checked(list(rows))
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot write the store: {exc}") from None

    def acknowledge(self, token: object) -> None:
        """Nothing to wait for: :meth:`submit` committed."""


class StoreGate:
    """Reads holds and stops once the acting evaluator's cursor has reached the last seq."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        wait_ms: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.conn = conn
        self.wait_ms = wait_ms
        self.clock = clock
        self.sleep = sleep

    def state(self, harness: str, run: str | None, *, gated: bool) -> tuple[GateState, bool]:
        try:
            late = gated and not self._caught_up()
        except sqlite3.Error as exc:
            raise GateUnavailable(f"cannot read the evaluator's progress: {exc}") from None
        return read_state(self.conn, harness, run, holds=gated), late

    def _caught_up(self) -> bool:
        """Wait (bounded) for the live cursor to reach the newest row; whether it did."""
        conn = self.conn
        row = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()
        target = int(row[0] or 0)
        deadline = self.clock() + self.wait_ms / 1000
        while True:
            cursor = conn.execute(
                "SELECT seq FROM rule_cursor WHERE name = ?", (LIVE_CURSOR,)
            ).fetchone()
            if cursor is not None and int(cursor[0]) >= target:
                return True
            if not _someone_acts(conn) or self.clock() >= deadline:
                return False
            self.sleep(POLL_S)


def _someone_acts(conn: sqlite3.Connection) -> bool:
    """An unexpired evaluator lease: somebody will move the cursor."""
    row = conn.execute("SELECT expires_at FROM evaluator_lease WHERE id = 1").fetchone()
    return row is not None and int(row[0]) > time.time_ns() // 1_000_000
