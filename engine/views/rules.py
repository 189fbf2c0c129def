"""The Rules pane's model: every loaded rule with its source, levels, state and counts.

It joins what the loader says (source, written level, hash, load errors) with
what the operator's config grants (enforce, disable: via the lifecycle's own
``decide_level`` / ``shadow_decision``, so the pane can never disagree with
the evaluator) and what the store recorded (disabled errors, first-seen time
for shadow, fires and suppressed counts).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.config import HarnessConfig
from engine.errors import Diagnostic
from engine.rules.authority.enforcement import Authority, decide_level, shadow_decision
from engine.rules.language.loader import default_sources, load_rules
from engine.rules.language.model import LoadResult as LoadResult  # what the Rules pane keeps
from engine.rules.language.model import Rule
from engine.rules.language.sources import (
    keep_last_good as keep_last_good,  # the console reads it here
)
from engine.timefmt import iso_ms_precise
from engine.vocab import ENFORCED_LEVELS


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One rule as the Rules pane lists it. ``state`` is active | shadow | disabled | enforced."""

    name: str
    source_kind: str
    source_file: str
    level: str
    effective_level: str
    state: str
    state_detail: str
    hash: str
    fires: int
    suppressed: int
    error: str
    #: Journal time the shadow ends (None unless ``state`` is shadow).
    shadow_until: int | None = None


def load_console_rules(config: HarnessConfig, policy_dir: Path | None) -> LoadResult:
    """Load the starter pack, the configured policy repos and ``--policy`` like the evaluator."""
    policy = config.policy_rule_dirs()
    extra = [policy_dir] if policy_dir is not None and policy_dir not in policy else []
    return load_rules(default_sources(policy, extra), config.rules)


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


class FireCounter:
    """Per-rule fired and suppressed counts, updated incrementally by fire id.

    The Rules pane refreshes every few seconds; recounting a million fires
    each time would be a full scan, so only fires newer than the last seen id
    are counted (fires are append-only).
    """

    def __init__(self) -> None:
        self.last_id = 0
        self.fires: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}

    def update(self, conn: sqlite3.Connection) -> None:
        top = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM rule_fires").fetchone()[0])
        if top < self.last_id:  # a different or pruned store: start over
            self.__init__()  # type: ignore[misc]
        for r, status, n in conn.execute(
            "SELECT rule, status = 'suppressed', COUNT(*) FROM rule_fires"
            " WHERE id > ? AND id <= ? GROUP BY 1, 2",
            (self.last_id, top),
        ):
            bucket = self.suppressed if status else self.fires
            bucket[str(r)] = bucket.get(str(r), 0) + int(n)
        self.last_id = top


def rule_rows(
    conn: sqlite3.Connection,
    rules: Sequence[Rule],
    config: HarnessConfig,
    counter: FireCounter | None = None,
) -> list[RuleRow]:
    """Rows for ``rules``, with state decided in journal time (the newest row's ``at``)."""
    authority = Authority.from_config(config)
    now = int(conn.execute("SELECT COALESCE(MAX(at), 0) FROM rule_journal").fetchone()[0])
    counter = counter or FireCounter()
    counter.update(conn)
    fires = dict(counter.fires)
    suppressed = dict(counter.suppressed)
    stored: dict[str, tuple[str, str | None]] = {
        str(n): (str(s), e) for n, s, e in conn.execute("SELECT name, state, error FROM rule_state")
    }
    if _table_exists(conn, "rule_cooldowns"):
        for r, n in conn.execute(
            "SELECT rule, SUM(suppressed_total) FROM rule_cooldowns GROUP BY rule"
        ):
            suppressed[str(r)] = max(suppressed.get(str(r), 0), int(n or 0))
    first_seen: dict[tuple[str, str], int] = {}
    if _table_exists(conn, "rule_shadow"):
        for n, h, at in conn.execute("SELECT name, hash, first_seen_at FROM rule_shadow"):
            first_seen[(str(n), str(h))] = int(at)
    out: list[RuleRow] = []
    for rule in rules:
        effective, reasons = decide_level(rule, authority)
        state_row = stored.get(rule.name)
        error = ""
        until: int | None = None
        if rule.name in authority.disable:
            state, detail = "disabled", "silenced by [memory.rules] disable"
        elif state_row is not None and state_row[0] == "disabled":
            error = state_row[1] or ""
            state, detail = "disabled", f"disabled: {error}"
        else:
            seen = first_seen.get((rule.name, rule.hash))
            in_shadow, why = shadow_decision(rule, seen, now, authority.shadow_period_ms)
            if rule.source_kind != "starter" and seen is None:
                until = now + authority.shadow_period_ms
                state, detail = "shadow", f"shadow: not evaluated yet (≥ {iso_ms_precise(until)})"
            elif in_shadow:
                until = (seen or now) + authority.shadow_period_ms
                state, detail = "shadow", f"shadow until {iso_ms_precise(until)}"
            elif effective in ENFORCED_LEVELS:
                state, detail = "enforced", reasons[0]
            else:
                state, detail = "active", why if rule.source_kind != "starter" else reasons[0]
        out.append(
            RuleRow(
                name=rule.name,
                source_kind=rule.source_kind,
                source_file=rule.source_file,
                level=rule.level,
                effective_level=effective,
                state=state,
                state_detail=detail,
                hash=rule.hash,
                fires=fires.get(rule.name, 0),
                suppressed=suppressed.get(rule.name, 0),
                error=error,
                shadow_until=until if state == "shadow" else None,
            )
        )
    return out


def lint_lines(result: LoadResult, source_file: str) -> list[Diagnostic]:
    """The load errors and warnings that belong to one rule file."""
    return [
        d
        for d in (*result.errors, *result.warnings)
        if d.location.file is not None and Path(d.location.file) == Path(source_file)
    ]
