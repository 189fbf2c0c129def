"""Journal builders shared by the lifecycle tests: rows straight into ``rule_journal``.

Tests write rows with explicit ``at`` (journal time) so shadow periods,
cooldowns and hold clearing are exact and independent of the wall clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.config import HarnessConfig, RulesConfig
from engine.rules.language.loader import default_sources, load_rules
from engine.rules.language.model import CompiledRule

T0 = 1_780_000_000_000
MIN = 60_000
DIGEST = "sha256:" + "ab" * 32
COLS = ("at", "kind", "type", "source", "harness", "project", "run", "cause_digest")


class Journal:
    """Appends rows with increasing seq, and ticks every minute of journal time."""

    def __init__(self, conn: sqlite3.Connection, start: int = T0) -> None:
        self.conn = conn
        self.now = start
        self.next_tick = start

    def _insert(self, values: Sequence[object]) -> int:
        cur = self.conn.execute(
            f"INSERT INTO rule_journal ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))})",
            tuple(values),
        )
        return int(cur.lastrowid or 0)

    def advance(self, ms: int) -> None:
        """Move journal time forward, writing the tick rows crossed on the way."""
        target = self.now + ms
        while self.next_tick <= target:
            self.now = self.next_tick
            self._insert((self.now, "tick", "tick", "tick", None, None, None, None))
            self.next_tick += MIN
        self.now = target

    def run_event(self, type_: str, harness: str, cause: str | None = DIGEST) -> int:
        return self._insert(
            (self.now, "run_event", type_, "observer", harness, "p1", f"{harness}-run", cause)
        )

    def restarts(self, harness: str, n: int, gap_ms: int = MIN // 2) -> list[int]:
        seqs = []
        for _ in range(n):
            self.advance(gap_ms)
            seqs.append(self.run_event("restart", harness))
        return seqs


def starter(names: Iterable[str] = ("restart_same_error",)) -> list[CompiledRule]:
    res = load_rules(default_sources(), RulesConfig())
    wanted = set(names)
    return [cr for cr in res.rules if cr.rule.name in wanted]


def rule_from_text(tmp: Path, text: str, kind: str = "policy") -> CompiledRule:
    from engine.rules.language.loader import compile_rule_text

    cr, errors = compile_rule_text(text, str(tmp / "rule.yml"), kind, RulesConfig())  # type: ignore[arg-type]
    assert cr is not None, errors
    return cr


def config(**rules: object) -> HarnessConfig:
    return HarnessConfig(rules=RulesConfig(**rules))  # type: ignore[arg-type]
