"""Explain a stored fire from stored rows alone: event, now, rule version, aggregates, level.

Why recompute: a fire's stored aggregate results are claims. Explain re-asks
the journal through the independent SQL host, at the fire's own position
(rows with seq <= the fire's seq and at > now - window), lists the seqs each
call counted, and says whether the recomputed value equals the stored one. A
mismatch is shown, not hidden (it can only come from pruned rows or a bug).

The console steps through the result, so it is an ordered list of steps.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.durations import format_duration_ms
from engine.errors import InputError
from engine.rules.evaluation.evaluator import row_view
from engine.rules.evaluation.fires import Fire, get_fire
from engine.rules.evaluation.host_sql import SqlHost, StoreReadError
from engine.rules.evaluation.window import ROW_SELECT
from engine.rules.language.model import CallRecord
from engine.timefmt import iso_ms_precise

MAX_SEQS = 200


@dataclass(frozen=True, slots=True)
class Step:
    """One step of an explanation: a title, structured detail, and text lines."""

    kind: str  # event | now | rule | call | decision | actions
    title: str
    detail: dict[str, Any]
    lines: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, **self.detail}


@dataclass(frozen=True, slots=True)
class Explanation:
    """A fire and the steps that justify it; ``consistent`` is False if any recompute differs."""

    fire: Fire
    steps: tuple[Step, ...]
    consistent: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "fire": self.fire.to_json(),
            "consistent": self.consistent,
            "steps": [s.to_json() for s in self.steps],
        }

    def render_text(self) -> str:
        out = [f"fire {self.fire.id}: {self.fire.rule} at seq {self.fire.seq}"]
        for i, step in enumerate(self.steps, start=1):
            out.append(f"\n{i}. {step.title}")
            out.extend(f"   {line}" for line in step.lines)
        verdict = "all aggregates recomputed equal" if self.consistent else "RECOMPUTE MISMATCH"
        out.append(f"\n{verdict}")
        return "\n".join(out)


def cel_duration(ms: int) -> str:
    """A window as CEL spells it (CEL durations have no day unit: 24h, not 1d)."""
    hours, rest = divmod(ms, 3_600_000)
    text = f"{hours}h" if hours else ""
    return text + (format_duration_ms(rest) if rest or not text else "")


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def explain_fire(conn: sqlite3.Connection, fire_id: int) -> Explanation:
    """Build the explanation of stored fire ``fire_id`` (InputError if there is none)."""
    fire = get_fire(conn, fire_id)
    if fire is None:
        raise InputError(f"no fire with id {fire_id} in this store")
    return explain_fire_value(conn, fire, fire_id)


def explain_fire_value(conn: sqlite3.Connection, fire: Fire, fire_id: int = 0) -> Explanation:
    """Explain ``fire`` itself, stored or not: a backtest fire (id 0) has no actions to show.

    Split from :func:`explain_fire` so the console's Backtest pane explains a
    would-be fire with the very same steps a stored one gets. The steps, in
    order: the event row, ``now``, the rule version, each aggregate recomputed
    from the journal, the level decision, and (for a stored fire) its actions.
    """
    steps = [_event_step(conn, fire), _now_step(fire), _rule_step(conn, fire)]
    host = SqlHost(conn)
    host.set_position(fire.seq, fire.at)
    consistent = True
    for i, call in enumerate(fire.calls, start=1):
        step, equal = _call_step(conn, host, fire, i, call)
        steps.append(step)
        consistent = consistent and equal
    steps.append(_decision_step(fire))
    if _table_exists(conn, "rule_actions"):
        steps.append(_actions_step(conn, fire_id))
    return Explanation(fire, tuple(steps), consistent)


def _event_step(conn: sqlite3.Connection, fire: Fire) -> Step:
    raw = conn.execute(ROW_SELECT + " WHERE seq = ?", (fire.seq,)).fetchone()
    if raw is None:
        return Step("event", "The event row", {"row": None}, (f"row {fire.seq} was pruned",))
    view = {k: v for k, v in row_view(raw).items() if v is not None}
    return Step(
        "event",
        f"The event row (seq {fire.seq})",
        {"row": view},
        tuple(f"{k}: {v}" for k, v in view.items()),
    )


def _now_step(fire: Fire) -> Step:
    return Step(
        "now",
        "now = the row's admission time (journal time, never a clock)",
        {"now_ms": fire.at, "now": iso_ms_precise(fire.at)},
        (f"now = {iso_ms_precise(fire.at)} ({fire.at} ms)",),
    )


def _rule_step(conn: sqlite3.Connection, fire: Fire) -> Step:
    version = conn.execute(
        "SELECT source_file, source_kind, text, first_seen_seq FROM rule_versions"
        " WHERE hash = ? AND name = ?",
        (fire.hash, fire.rule),
    ).fetchone()
    if version is None:
        detail: dict[str, Any] = {"hash": fire.hash, "name": fire.rule, "file": None}
        lines: tuple[str, ...] = (f"hash {fire.hash}", "(this version's text was not recorded)")
    else:
        detail = {
            "hash": fire.hash,
            "name": fire.rule,
            "file": version[0],
            "source_kind": version[1],
            "text": version[2],
            "first_seen_seq": version[3],
        }
        lines = (
            f"hash {fire.hash}",
            f"file {version[0]} ({version[1]})",
            *("| " + line for line in str(version[2]).splitlines()),
        )
    return Step("rule", f"The rule version: {fire.rule}", detail, lines)


def _call_step(
    conn: sqlite3.Connection, host: SqlHost, fire: Fire, i: int, call: CallRecord
) -> tuple[Step, bool]:
    """Aggregate ``i`` recomputed from the journal beside its stored result; (step, equal)."""
    selector = dict(call.selector)
    detail: dict[str, Any] = {
        "index": i,
        "fn": call.fn,
        "field": call.field,
        "selector": selector,
        "window_ms": call.window_ms,
        "window": format_duration_ms(call.window_ms),
        "stored_result": call.result,
    }
    try:
        recomputed: int | bool
        if call.fn == "distinct" and call.field:
            recomputed = host.distinct(call.field, selector, call.window_ms)
            values = _distinct_values(conn, call.field, host, selector, call.window_ms)
            detail["distinct_values"] = values
        elif call.fn == "exists":
            recomputed = host.exists(selector, call.window_ms)
        else:
            recomputed = host.count(selector, call.window_ms)
        seqs, total = host.matching_seqs(selector, call.window_ms, MAX_SEQS)
    except StoreReadError as exc:
        detail.update({"recomputed": None, "equal": False, "error": str(exc)})
        return Step("call", f"{call.fn} #{i}", detail, (f"cannot recompute: {exc}",)), False
    equal = recomputed == call.result
    detail.update({"recomputed": recomputed, "equal": equal, "seqs": seqs, "matching_rows": total})
    args = json.dumps(selector, sort_keys=True)
    head = f"{call.fn}({json.dumps(call.field) + ', ' if call.field else ''}{args}, "
    head += f'duration("{cel_duration(call.window_ms)}"))'
    shown = ", ".join(str(s) for s in seqs)
    more = f" … ({total} rows)" if total > len(seqs) else ""
    lines: list[str] = [
        head,
        f"stored result {call.result}; recomputed from the journal {recomputed}"
        + (" (equal)" if equal else " (MISMATCH)"),
        f"rows counted (seq <= {fire.seq}, at > now - {format_duration_ms(call.window_ms)}):"
        f" {shown or 'none'}{more}",
    ]
    if "distinct_values" in detail:
        lines.append(f"distinct {call.field}: {', '.join(detail['distinct_values'])}")
    return Step("call", f"Aggregate {i}: {call.fn}", detail, tuple(lines)), equal


def _decision_step(fire: Fire) -> Step:
    return Step(
        "decision",
        "The level decision",
        {
            "status": fire.status,
            "level": fire.level,
            "effective_level": fire.effective_level,
            "reasons": list(fire.reasons),
        },
        (
            f"status {fire.status}",
            f"written level {fire.level}; acts at {fire.effective_level}",
            *(f"because: {r}" for r in fire.reasons),
        ),
    )


def _actions_step(conn: sqlite3.Connection, fire_id: int) -> Step:
    actions = _actions(conn, fire_id)
    lines = tuple(
        f"{a['action']}: "
        + (
            f"exit {a['exit_status']}"
            if a["exit_status"] is not None
            else (a["error"] or "started, no outcome recorded")
        )
        for a in actions
    ) or ("no action recorded for this fire",)
    return Step("actions", "Actions", {"actions": actions}, lines)


def _distinct_values(
    conn: sqlite3.Connection, fld: str, host: SqlHost, selector: dict[str, str], window_ms: int
) -> list[str]:
    clauses = ["seq <= ?", "at > ?", f"{fld} IS NOT NULL", f"{fld} != ''"]
    params: list[Any] = [host.seq, host.now_ms - window_ms]
    for key in sorted(selector):
        if selector[key] == "":
            clauses.append(f"({key} IS NULL OR {key} = '')")
        else:
            clauses.append(f"{key} = ?")
            params.append(selector[key])
    sql = f"SELECT DISTINCT {fld} FROM rule_journal WHERE {' AND '.join(clauses)} ORDER BY 1"
    return [str(r[0]) for r in conn.execute(sql + f" LIMIT {MAX_SEQS}", params)]


def _actions(conn: sqlite3.Connection, fire_id: int) -> list[dict[str, Any]]:
    try:
        cur = conn.execute("SELECT * FROM rule_actions WHERE fire_id = ? ORDER BY id", (fire_id,))
    except sqlite3.Error:
        return []
    names = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        item = dict(zip(names, row, strict=True))
        item.setdefault("action", "")
        item.setdefault("exit_status", None)
        item.setdefault("error", None)
        out.append(item)
    return out
