"""Explain a stored fire as a list of steps the console pages through.

Steps: the event row, ``now``, each aggregate call (arguments, stored result,
and the journal rows it counted, recomputed from the journal and compared with
the stored result), the level decision with its reasons, the action outcome.
The recount reads only rows with seq <= the fire's seq, the same visibility
the evaluator had, so a mismatch means the store changed, and is shown.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.views.fires import fire_by_id

SELECTOR_COLUMNS = frozenset(
    (
        "kind",
        "type",
        "source",
        "harness",
        "project",
        "run",
        "tool",
        "outcome",
        "path",
        "cause_digest",
        "args_digest",
        "other_harness",
        "fact",
    )
)
JOURNAL_COLUMNS = (
    "seq",
    "at",
    "kind",
    "type",
    "source",
    "harness",
    "project",
    "run",
    "tool",
    "outcome",
    "path",
    "cause_digest",
    "args_digest",
    "other_harness",
    "fact",
    "n",
)
MAX_LISTED = 50
SATURATE = 1_000_000


@dataclass(frozen=True, slots=True)
class ExplainStep:
    """One page of an explanation: a title and the lines under it."""

    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FireExplanation:
    fire_id: int
    rule: str
    steps: tuple[ExplainStep, ...]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _recount(
    conn: sqlite3.Connection, call: dict[str, Any], seq: int, at: int
) -> tuple[int | bool | None, list[int], str]:
    """Recompute one call: (result, the counted seqs (first MAX_LISTED), note)."""
    selector = call.get("selector") or {}
    if not isinstance(selector, dict) or any(k not in SELECTOR_COLUMNS for k in selector):
        return None, [], "selector not recomputable"
    window = int(call.get("window_ms") or 0)
    where = ["seq <= ?", "at > ?"] + [f"{k} = ?" for k in selector]
    params: list[Any] = [seq, at - window, *selector.values()]
    fn = call.get("fn")
    sql_where = " AND ".join(where)
    if fn == "distinct":
        field = call.get("field")
        if field not in SELECTOR_COLUMNS:
            return None, [], "field not recomputable"
        n = conn.execute(
            f"SELECT COUNT(DISTINCT {field}) FROM rule_journal WHERE {sql_where}", params
        ).fetchone()[0]
        result: int | bool = min(int(n), SATURATE)
    else:
        n = conn.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM rule_journal WHERE {sql_where} LIMIT ?)",
            [*params, SATURATE],
        ).fetchone()[0]
        result = bool(n) if fn == "exists" else int(n)
    seqs = [
        int(r[0])
        for r in conn.execute(
            f"SELECT seq FROM rule_journal WHERE {sql_where} ORDER BY seq DESC LIMIT ?",
            [*params, MAX_LISTED],
        )
    ]
    return result, seqs, ""


def explain_fire(conn: sqlite3.Connection, fire_id: int) -> FireExplanation | None:
    """The steps for ``fire_id``, or None when there is no such fire."""
    fire = fire_by_id(conn, fire_id)
    if fire is None:
        return None
    steps: list[ExplainStep] = []
    cols = ", ".join(JOURNAL_COLUMNS)
    row = conn.execute(f"SELECT {cols} FROM rule_journal WHERE seq = ?", (fire.seq,)).fetchone()
    if row is None:
        steps.append(ExplainStep("Event row", (f"seq {fire.seq}: pruned from the journal",)))
    else:
        lines = tuple(
            f"{k}: {v}" for k, v in zip(JOURNAL_COLUMNS, row, strict=True) if v is not None
        )
        steps.append(ExplainStep(f"Event row (seq {fire.seq})", lines))
    steps.append(
        ExplainStep(
            "Now",
            (
                f"now = the row's at = {iso(fire.at)} ({fire.at} ms)",
                f"primitives saw rows with seq <= {fire.seq} and at > now - window",
            ),
        )
    )
    try:
        calls = json.loads(fire.calls)
    except ValueError:
        calls = []
    for i, call in enumerate(calls if isinstance(calls, list) else [], start=1):
        if not isinstance(call, dict):
            continue
        fn = call.get("fn", "?")
        args = json.dumps(call.get("selector") or {}, sort_keys=True)
        if call.get("field"):
            args = f"{json.dumps(call['field'])}, {args}"
        window = int(call.get("window_ms") or 0)
        stored = call.get("result")
        call_lines = [
            f"{fn}({args}, window {window // 1000}s)",
            f"stored result: {json.dumps(stored)}",
        ]
        result, seqs, note = _recount(conn, call, fire.seq, fire.at)
        if note:
            call_lines.append(note)
        else:
            same = "matches" if result == stored else "DIFFERS from"
            call_lines.append(f"recomputed from the journal: {json.dumps(result)} ({same} stored)")
            more = " …" if len(seqs) == MAX_LISTED else ""
            call_lines.append(
                "counted rows (newest first): " + (", ".join(map(str, seqs)) or "none") + more
            )
        steps.append(ExplainStep(f"Aggregate call {i} of {len(calls)}", tuple(call_lines)))
    try:
        reasons = json.loads(fire.reasons)
    except ValueError:
        reasons = [fire.reasons]
    reason_lines = [f"- {r}" for r in reasons] if isinstance(reasons, list) else [str(reasons)]
    steps.append(
        ExplainStep(
            "Level decision",
            (
                f"rule {fire.rule} @ {fire.hash[:12]}",
                f"written level: {fire.level}",
                f"effective level: {fire.effective_level}",
                f"status: {fire.status}",
                *reason_lines,
            ),
        )
    )
    actions = conn.execute(
        "SELECT action, argv, started_at, finished_at, exit_status, error FROM rule_actions"
        " WHERE fire_id = ? ORDER BY id",
        (fire_id,),
    ).fetchall()
    if not actions:
        outcome: tuple[str, ...] = (
            "no action outcome recorded (record only, shadow, or the action was lost "
            "to a crash after the fire committed: actions run at most once)",
        )
    else:
        out = []
        for action, argv, _started, finished, status, error in actions:
            when = iso(int(finished)) if finished else "not finished"
            out.append(f"{action}: {argv} -> exit {status} at {when}")
            if error:
                out.append(f"  error: {error}")
        outcome = tuple(out)
    steps.append(ExplainStep("Action outcome", outcome))
    return FireExplanation(fire_id, fire.rule, tuple(steps))
