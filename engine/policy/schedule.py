"""Scheduled mining: ``[memory] rule_miners`` run inside the acting evaluator.

The schedule runs in journal time like everything else: miners run when the
journal's last ``at`` has moved :data:`MINE_EVERY_MS` past the last mining,
and the mark is stored (``rule_cursor`` row ``miner``), so restarting the
evaluator neither skips nor repeats a mining. Default: no miners configured,
nothing runs. Mining only stores proposals at notify; it never acts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from engine.config import RulesConfig
from engine.errors import Diagnostic, InputError, Location
from engine.policy.miner import MINER_NAMES, MinedPattern, mine
from engine.rules.language.model import CompiledRule

MINE_EVERY_MS = 3_600_000
MINE_LOOKBACK = "24h"
MARK = "miner"


def _last_row(conn: sqlite3.Connection) -> tuple[int | None, int | None]:
    """(seq, at) of the newest row. ``at`` is non-decreasing in seq, so the last row by
    primary key has the largest ``at`` without scanning (``at`` has no index of its own);
    this runs after every evaluator step when miners are configured."""
    row = conn.execute("SELECT seq, at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
    return (None, None) if row is None else (int(row[0]), int(row[1]))


def check_miner_names(names: Sequence[str], source: str = "harness.toml") -> tuple[str, ...]:
    """The configured names, or an InputError naming the unknown ones and the known set."""
    unknown = [n for n in names if n not in MINER_NAMES]
    if unknown:
        msg = (
            f"unknown miner(s) in [memory] rule_miners: {', '.join(unknown)} "
            f"(known: {', '.join(MINER_NAMES)})"
        )
        raise InputError(
            msg,
            title="Invalid harness.toml",
            diagnostics=[Diagnostic(msg, Location(source), path="memory.rule_miners")],
        )
    return tuple(names)


@dataclass
class MinerSchedule:
    """Decides when configured miners are due, and runs them."""

    miners: tuple[str, ...]
    every_ms: int = MINE_EVERY_MS

    def _mark(self, conn: sqlite3.Connection) -> int | None:
        row = conn.execute("SELECT at FROM rule_cursor WHERE name = ?", (MARK,)).fetchone()
        return int(row[0]) if row else None

    def due(self, conn: sqlite3.Connection) -> bool:
        if not self.miners:
            return False
        last = _last_row(conn)[1]
        if last is None:
            return False
        mark = self._mark(conn)
        return mark is None or int(last) - mark >= self.every_ms

    def run(
        self, conn: sqlite3.Connection, rules: Sequence[CompiledRule], config: RulesConfig
    ) -> list[MinedPattern]:
        """Mine the last day of journal time and store the mark (journal time of the run)."""
        seq, at = _last_row(conn)
        found = mine(conn, rules, config, since=MINE_LOOKBACK, miners=self.miners)
        conn.execute(
            "INSERT INTO rule_cursor (name, seq, at) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET seq = excluded.seq, at = excluded.at",
            (MARK, int(seq or 0), int(at or 0)),
        )
        return found


def mine_if_due(
    schedule: MinerSchedule,
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    config: RulesConfig,
) -> list[MinedPattern]:
    """Run the schedule's miners when due, with the rules ``disable`` does not silence."""
    if not schedule.due(conn):
        return []
    disabled = set(config.disable)
    return schedule.run(conn, [r for r in rules if r.rule.name not in disabled], config)
