"""The Promotion view's model: what enforcing a rule would have done, and the line that enforces it.

An operator promotes a rule by adding it to ``[memory.rules] enforce`` of the
global ``harness.toml`` (only that file grants hold/stop). Before doing so
they want to know how long the rule has run (active, or in shadow until when)
and what it would have held or stopped. The second part is a backtest of the
rule over the whole recorded history through the real lifecycle wiring
(:func:`engine.rules.authority.lifecycle_run.backtest_with_lifecycle`) with an authority
that pins this version and skips the shadow period, so the hold spans, stops
and suppressed matches are the ones the live evaluator would have produced.
The view then offers the exact ``enforce`` line with a ``name@<hash prefix>``
pin. Nothing here writes ``harness.toml``: the operator pastes the line.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import HarnessConfig
from engine.rules.authority.enforcement import Authority, EnforceEntry
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation.backtest import BacktestResult, Progress, resolve_range
from engine.rules.language.model import CompiledRule
from engine.timefmt import minute_ms
from engine.vocab import ENFORCED_LEVELS, FIRED, STOP, SUPPRESSED

#: Hex digits in the pin the view proposes (the loader accepts 4 or more).
PIN_DIGITS = 12


@dataclass(frozen=True, slots=True)
class PromotionHeader:
    """The quick facts: version, level, enforcement today, time active or in shadow, the line."""

    name: str
    hash: str
    level: str
    source_kind: str
    enforced: bool
    why: str
    #: Journal time this version was first evaluated live (None: never).
    first_seen_at: int | None
    #: Journal time its shadow ends (None: starter rules never shadow, or unseen).
    shadow_until: int | None
    journal_now: int
    pin: str
    enforce_line: str

    @property
    def in_shadow(self) -> bool:
        return self.shadow_until is not None and self.journal_now < self.shadow_until

    @property
    def can_act(self) -> bool:
        """Enforcing matters only for a rule written at hold or stop."""
        return self.level in ENFORCED_LEVELS

    def age_line(self) -> str:
        if self.first_seen_at is None:
            return "not evaluated live yet"
        days = (self.journal_now - self.first_seen_at) / 86_400_000
        since = f"evaluated live since {_min(self.first_seen_at)} ({days:.1f} days of journal time)"
        if self.in_shadow and self.shadow_until is not None:
            return f"in shadow until {_min(self.shadow_until)}; {since}"
        if self.shadow_until is not None:
            return f"active (shadow ended {_min(self.shadow_until)}); {since}"
        return f"active ({self.source_kind}: no shadow period); {since}"


@dataclass(frozen=True, slots=True)
class WouldHold:
    """One simulated hold span (journal time) and whether an operator released a real hold then."""

    harness: str
    start_at: int
    end_at: int | None
    duration_ms: int | None
    operator_released: bool


@dataclass(frozen=True)
class PromotionReport:
    """The backtest as if enforced: holds, stops, harnesses, suppressed, operator releases."""

    result: BacktestResult
    holds: tuple[WouldHold, ...]
    stops: int
    acting: dict[str, int]
    suppressed: int
    harnesses: tuple[str, ...]
    #: Live holds of this rule (any version) that an operator released.
    operator_released_live: int

    @property
    def cancelled(self) -> bool:
        return self.result.cancelled


def enforce_line(config: HarnessConfig, name: str, hash_: str) -> tuple[str, str]:
    """The pin and the ``enforce = [...]`` line: today's entries, other entries for ``name`` out."""
    pin = f"{name}@{hash_[:PIN_DIGITS]}"
    kept = [e for e in config.rules.enforce if e.split("@", 1)[0].strip() != name]
    return pin, "enforce = [" + ", ".join(json.dumps(e) for e in (*kept, pin)) + "]"


def _first_seen(conn: sqlite3.Connection, name: str, hash_: str) -> tuple[int | None, int | None]:
    """(first evaluated live, first seen for shadow) in journal time."""
    # ``first_seen_seq`` is the live cursor when the version was loaded; it first
    # evaluated the next row.
    row = conn.execute(
        "SELECT j.at FROM rule_versions v JOIN rule_journal j ON j.seq > v.first_seen_seq"
        " WHERE v.name = ? AND v.hash = ? ORDER BY j.seq LIMIT 1",
        (name, hash_),
    ).fetchone()
    shadow = None
    has_shadow = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rule_shadow'"
    ).fetchone()
    if has_shadow:
        srow = conn.execute(
            "SELECT first_seen_at FROM rule_shadow WHERE name = ? AND hash = ?", (name, hash_)
        ).fetchone()
        shadow = None if srow is None else int(srow[0])
    return (None if row is None else int(row[0])), shadow


def promotion_header(
    conn: sqlite3.Connection,
    compiled: CompiledRule,
    config: HarnessConfig,
    *,
    granted: HarnessConfig | None = None,
) -> PromotionHeader:
    """The facts shown at once, before the backtest runs.

    ``config`` is what the console works with; ``granted`` is what the
    operator's harness.toml itself says (default: the same). The line to paste
    is built from ``granted``: with ``--demo`` the console enforces a rule in
    memory only, and a line that carried it would grant real hold power the
    operator never wrote.
    """
    rule = compiled.rule
    authority = Authority.from_config(config)
    enforced, why = authority.enforcement(rule.name, rule.hash)
    seen, shadow_seen = _first_seen(conn, rule.name, rule.hash)
    now = conn.execute("SELECT at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
    shadow_until = None
    if rule.source_kind != "starter" and shadow_seen is not None:
        shadow_until = shadow_seen + authority.shadow_period_ms
    pin, line = enforce_line(granted or config, rule.name, rule.hash)
    return PromotionHeader(
        name=rule.name,
        hash=rule.hash,
        level=rule.level,
        source_kind=rule.source_kind,
        enforced=enforced,
        why=why,
        first_seen_at=seen if seen is not None else shadow_seen,
        shadow_until=shadow_until,
        journal_now=int(now[0]) if now else 0,
        pin=pin,
        enforce_line=line,
    )


def as_enforced(config: HarnessConfig, compiled: CompiledRule) -> Authority:
    """Today's authority plus a pin of this version, with no shadow period."""
    base = Authority.from_config(config)
    pin, _ = enforce_line(config, compiled.rule.name, compiled.rule.hash)
    name, prefix = pin.split("@", 1)
    others = tuple(e for e in base.enforce if e.name != name)
    return dataclasses.replace(
        base,
        enforce=(*others, EnforceEntry(pin, name, prefix)),
        disable=base.disable - {name},
        shadow_period_ms=0,
    )


def _operator_releases(conn: sqlite3.Connection) -> list[tuple[str, int, int, str]]:
    return [
        (str(h), int(c), int(r), str(rule))
        for h, c, r, rule in conn.execute(
            "SELECT harness, created_at, released_at, rule FROM rule_holds"
            " WHERE released_at IS NOT NULL AND released_by IS NOT NULL AND released_by != 'rule'"
        )
    ]


def simulate_enforced(
    conn: sqlite3.Connection,
    compiled: CompiledRule,
    config: HarnessConfig,
    *,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> PromotionReport:
    """Backtest ``compiled`` over all recorded history as if this version were enforced."""
    kwargs: dict[str, Any] = {"progress": progress, "cancel": cancel}
    result: BacktestResult = backtest_with_lifecycle(
        conn, [compiled], resolve_range(conn), as_enforced(config, compiled), **kwargs
    )
    summary = result.extra.get("lifecycle") or {}
    releases = _operator_releases(conn)
    holds: list[WouldHold] = []
    for span in summary.get("hold_spans") or []:
        start = _at(conn, int(span["start_seq"]))
        end_seq = span.get("end_seq")
        end = None if end_seq is None else _at(conn, int(end_seq))
        released = any(
            h == span["harness"] and c < (end if end is not None else 2**62) and r >= start
            for h, c, r, _rule in releases
        )
        holds.append(WouldHold(str(span["harness"]), start, end, span.get("duration_ms"), released))
    stops = [f for f in result.fires if f.status == FIRED and f.effective_level == STOP]
    harnesses = sorted({h.harness for h in holds} | {f.target for f in stops})
    return PromotionReport(
        result=result,
        holds=tuple(holds),
        stops=len(stops),
        acting=dict(summary.get("acting_levels") or {}),
        suppressed=sum(1 for f in result.fires if f.status == SUPPRESSED),
        harnesses=tuple(harnesses),
        operator_released_live=sum(1 for *_x, rule in releases if rule == compiled.rule.name),
    )


def _min(ms: int) -> str:
    """Journal time to the minute, UTC (what an operator compares with the Timeline)."""
    return minute_ms(ms) + " UTC"


def _at(conn: sqlite3.Connection, seq: int) -> int:
    row = conn.execute("SELECT at FROM rule_journal WHERE seq = ?", (seq,)).fetchone()
    return int(row[0]) if row else 0
