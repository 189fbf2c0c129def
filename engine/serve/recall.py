"""What a fresh process reads back from the store: the memory a :class:`CallBook` lacks.

Serve keeps runs, streaks and editors in memory, but after a restart (and in
the command hook, one process per tool call) memory is empty. Without this a
restarted serve would write a second ``run_started`` for a run it already
journaled, restart every loop-guard streak at zero and miss collisions with
edits made just before. Each question is one indexed read, asked once per
run or path (the answer then lives in memory).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


class StoreRecall:
    """Reads back runs, streaks and editors; ``connect`` gives this thread's connection."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], loop_guard: int) -> None:
        self.connect = connect
        self.loop_guard = loop_guard

    def run_started(self, harness: str, run: str) -> bool:
        row = (
            self.connect()
            .execute(
                "SELECT 1 FROM rule_journal WHERE harness = ? AND type = 'run_started' "
                "AND run = ? LIMIT 1",
                (harness, run),
            )
            .fetchone()
        )
        return row is not None

    def streak(self, harness: str, run: str | None) -> tuple[str, str, int] | None:
        """(tool, args digest, length) of the run's unbroken streak of identical newest calls."""
        rows = (
            self.connect()
            .execute(
                # at DESC, seq DESC walks the (harness, type, at) index backwards and
                # stops at the limit; ORDER BY seq alone sorted every call of the harness.
                "SELECT tool, args_digest FROM rule_journal WHERE harness = ? "
                "AND type = 'tool_call' AND run IS ? ORDER BY at DESC, seq DESC LIMIT ?",
                (harness, run, self.loop_guard + 1),
            )
            .fetchall()
        )
        if not rows or rows[0][1] is None:
            return None
        count = 0
        for r in rows:
            if tuple(r) != tuple(rows[0]):
                break
            count += 1
        return str(rows[0][0]), str(rows[0][1]), count

    def editors(self, path: str, since_ms: int) -> dict[str, int]:
        """Harnesses that edited ``path`` after ``since_ms``, with their last edit time."""
        return {
            str(h): int(at)
            for h, at in self.connect().execute(
                "SELECT harness, MAX(at) FROM rule_journal WHERE type = 'file_edited' "
                "AND path = ? AND at > ? GROUP BY harness",
                (path, since_ms),
            )
        }
