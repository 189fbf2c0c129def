"""Store facts for ``harness metrics`` (Prometheus text) and ``harness doctor``.

One collector reads every figure from the store, so the numbers an operator
sees in ``doctor`` and the ones a scraper sees in ``metrics`` can never
disagree. Everything is read from committed tables (no in-process counters),
because the evaluator, the console and these commands are separate
processes. A table that does not exist yet (an older store, a part not yet
migrated) reads as empty instead of failing the whole report.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from engine.rules.authority.lease import LeaseInfo, current_lease, wall_ms
from engine.store.txn import snapshot


@dataclass(frozen=True, slots=True)
class StoreFacts:
    rows_by_kind: dict[str, int] = field(default_factory=dict)
    journal_counters: dict[str, int] = field(default_factory=dict)
    rule_counters: dict[str, int] = field(default_factory=dict)
    last_seq: int = 0
    last_at: int = 0
    first_at: int | None = None
    cursor_seq: int | None = None
    cursor_at: int | None = None
    fires: dict[tuple[str, str], int] = field(default_factory=dict)
    suppressed: dict[str, int] = field(default_factory=dict)
    rule_errors: dict[str, str] = field(default_factory=dict)
    store_errors: int = 0
    holds_active: int = 0
    holds_by_harness: dict[str, int] = field(default_factory=dict)
    actions: dict[tuple[str, str], int] = field(default_factory=dict)
    lease: LeaseInfo | None = None
    now_ms: int = 0

    @property
    def lag_rows(self) -> int:
        return max(self.last_seq - (self.cursor_seq or 0), 0)

    @property
    def lag_ms(self) -> int:
        if self.cursor_at is None or self.lag_rows == 0:
            return 0
        return max(self.last_at - self.cursor_at, 0)

    @property
    def evaluations(self) -> int:
        return self.rule_counters.get("evaluations", 0)


def _rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []
        raise


def collect(conn: sqlite3.Connection, *, now_ms: int | None = None) -> StoreFacts:
    """Read every figure doctor and metrics report, in one read transaction."""
    with snapshot(conn):
        rows_by_kind = {
            str(k): int(n)
            for k, n in _rows(conn, "SELECT kind, COUNT(*) FROM rule_journal GROUP BY kind")
        }
        jc = {str(k): int(v) for k, v in _rows(conn, "SELECT name, value FROM journal_counters")}
        rc = {str(k): int(v) for k, v in _rows(conn, "SELECT name, value FROM rule_counters")}
        bounds = _rows(conn, "SELECT MAX(seq), MAX(at), MIN(at) FROM rule_journal")
        max_seq, max_at, min_at = bounds[0] if bounds else (None, None, None)
        last_seq = max(int(max_seq or 0), jc.get("last_seq", 0))
        last_at = max(int(max_at or 0), jc.get("last_at", 0))
        cursors = _rows(conn, "SELECT seq, at FROM rule_cursor ORDER BY seq DESC LIMIT 1")
        fires = {
            (str(r), str(s)): int(n)
            for r, s, n in _rows(
                conn, "SELECT rule, status, COUNT(*) FROM rule_fires GROUP BY rule, status"
            )
        }
        suppressed = {
            str(r): int(n)
            for r, n in _rows(
                conn, "SELECT rule, SUM(suppressed_total) FROM rule_cooldowns GROUP BY rule"
            )
        }
        errors = {
            str(name): str(err or state)
            for name, state, err in _rows(
                conn,
                "SELECT name, state, error FROM rule_state "
                "WHERE state = 'disabled' OR error IS NOT NULL",
            )
        }
        store_errors = _rows(conn, "SELECT COUNT(*) FROM rule_store_errors")
        holds = {
            str(h): int(n)
            for h, n in _rows(
                conn,
                "SELECT harness, COUNT(*) FROM rule_holds WHERE released_at IS NULL "
                "GROUP BY harness",
            )
        }
        actions = {
            (str(a), str(s)): int(n)
            for a, s, n in _rows(
                conn, "SELECT action, status, COUNT(*) FROM rule_actions GROUP BY action, status"
            )
        }
        try:
            lease = current_lease(conn)
        except sqlite3.OperationalError:
            lease = None
    return StoreFacts(
        rows_by_kind=rows_by_kind,
        journal_counters=jc,
        rule_counters=rc,
        last_seq=last_seq,
        last_at=last_at,
        first_at=None if min_at is None else int(min_at),
        cursor_seq=int(cursors[0][0]) if cursors else None,
        cursor_at=int(cursors[0][1]) if cursors else None,
        fires=fires,
        suppressed=suppressed,
        rule_errors=errors,
        store_errors=int(store_errors[0][0]) if store_errors else 0,
        holds_active=sum(holds.values()),
        holds_by_harness=holds,
        actions=actions,
        lease=lease,
        now_ms=wall_ms() if now_ms is None else now_ms,
    )


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items()) + "}"


class _Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, **labels: str) -> None:
        text = repr(float(value)) if isinstance(value, float) else str(int(value))
        self.lines.append(f"{name}{_labels(**labels)} {text}")


def render_prometheus(facts: StoreFacts) -> str:
    """The Prometheus text exposition format (version 0.0.4) of ``facts``."""
    out = _Exposition()
    out.family("harness_journal_rows", "gauge", "Journal rows stored, by kind.")
    for kind in sorted(
        set(facts.rows_by_kind) | {"run_event", "graph_event", "fact_event", "tick"}
    ):
        out.sample("harness_journal_rows", facts.rows_by_kind.get(kind, 0), kind=kind)
    for name, help_ in (
        ("dropped", "Rows dropped because the admission queue was full."),
        ("refused", "Rows refused at admission as malformed."),
        ("pruned", "Rows deleted by retention."),
    ):
        metric = f"harness_journal_{name}_total"
        out.family(metric, "counter", help_)
        out.sample(metric, facts.journal_counters.get(name, 0))
    out.family("harness_journal_last_seq", "gauge", "Highest admitted seq.")
    out.sample("harness_journal_last_seq", facts.last_seq)
    out.family("harness_rule_evaluations_total", "counter", "Rule evaluations performed.")
    out.sample("harness_rule_evaluations_total", facts.evaluations)
    out.family("harness_rule_fires_total", "counter", "Fires stored, by rule and status.")
    for (rule, status), n in sorted(facts.fires.items()):
        out.sample("harness_rule_fires_total", n, rule=rule, status=status)
    out.family(
        "harness_rule_suppressed_total", "counter", "Matches suppressed by cooldown, by rule."
    )
    for rule, n in sorted(facts.suppressed.items()):
        out.sample("harness_rule_suppressed_total", n, rule=rule)
    out.family("harness_rules_disabled", "gauge", "Rules disabled by an error.")
    out.sample("harness_rules_disabled", len(facts.rule_errors))
    out.family("harness_rule_errors", "gauge", "Rules disabled by an error (1 per rule).")
    for rule in sorted(facts.rule_errors):
        out.sample("harness_rule_errors", 1, rule=rule)
    out.family(
        "harness_rule_store_errors_total", "counter", "Rows whose primitives failed to read."
    )
    out.sample("harness_rule_store_errors_total", facts.store_errors)
    out.family("harness_evaluator_lag_rows", "gauge", "Journal rows not yet evaluated.")
    out.sample("harness_evaluator_lag_rows", facts.lag_rows)
    out.family(
        "harness_evaluator_lag_seconds", "gauge", "Journal time between cursor and newest row."
    )
    out.sample("harness_evaluator_lag_seconds", facts.lag_ms / 1000)
    out.family("harness_evaluator_lease_held", "gauge", "1 if an evaluator holds a live lease.")
    live = facts.lease is not None and not facts.lease.expired(facts.now_ms)
    out.sample("harness_evaluator_lease_held", 1 if live else 0)
    out.family("harness_rule_holds_active", "gauge", "Active rule holds (new runs refused).")
    out.sample("harness_rule_holds_active", facts.holds_active)
    out.family("harness_rule_actions_total", "counter", "Actions, by action and outcome.")
    for (action, status), n in sorted(facts.actions.items()):
        out.sample("harness_rule_actions_total", n, action=action, status=status)
    return "\n".join(out.lines) + "\n"
