"""Explain a stored fire as pages the console steps through.

The explanation itself (event row, now, rule version, each aggregate call
recomputed from the journal and checked against the stored result, the level
decision, the action outcome) is the rules engine's
``engine.rules.evaluation.fire_explain.explain_fire``, the same one ``harness rules explain``
prints; this module shapes it for a reader: times as UTC dates, the rows behind
an aggregate as time/harness/run/type/path lines, the hold a fire created, and
an enforce entry that only the ``--demo`` session holds in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.evaluation.fire_explain import Step, explain_fire_value
from engine.rules.evaluation.fire_explain import explain_fire as rules_explain_fire
from engine.rules.evaluation.fires import Fire
from engine.timefmt import readable_ms

#: How many of an aggregate's rows are listed one per line (the rest are counted).
ROWS_SHOWN = 12
_ROW_COLUMNS = ("seq", "at", "harness", "run", "type", "path")


@dataclass(frozen=True, slots=True)
class ExplainStep:
    """One page of an explanation: a title and the lines under it."""

    kind: str
    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FireExplanation:
    fire_id: int
    rule: str
    consistent: bool
    steps: tuple[ExplainStep, ...]


def explain_fire(
    conn: sqlite3.Connection, fire_id: int, *, in_memory_enforce: Sequence[str] = ()
) -> FireExplanation:
    """The pages for ``fire_id``; an unknown id is the engine's InputError.

    ``in_memory_enforce`` names rules the session enforces without any
    harness.toml (``--demo``), so the decision says where the grant came from.
    """
    exp = rules_explain_fire(conn, fire_id)
    demo = exp.fire.rule in in_memory_enforce
    steps = []
    for s in exp.steps:
        lines: tuple[str, ...] = tuple(s.lines)
        if s.kind == "event":
            lines = tuple(_event_line(line) for line in lines)
        elif s.kind == "now":
            lines = (f"now = {readable_ms(exp.fire.at)} ({exp.fire.at} ms)",)
        elif s.kind == "call":
            lines = _call_lines(conn, s)
        elif s.kind == "decision" and demo:
            lines = tuple(_demo_reason(line, exp.fire.rule) for line in lines)
        elif s.kind == "actions":
            lines = _action_lines(conn, fire_id, s)
        steps.append(ExplainStep(s.kind, s.title, lines))
    return FireExplanation(fire_id, exp.fire.rule, exp.consistent, tuple(steps))


def _event_line(line: str) -> str:
    key, sep, value = line.partition(": ")
    if sep and key == "at" and value.isdigit():
        return f"at: {readable_ms(int(value))} ({value} ms)"
    return line


def _call_lines(conn: sqlite3.Connection, step: Step) -> tuple[str, ...]:
    """The engine's lines, with the counted seqs replaced by one line per row (capped)."""
    seqs = [int(s) for s in step.detail.get("seqs", ())]
    total = int(step.detail.get("matching_rows", len(seqs)))
    kept = [line for line in step.lines if not line.startswith("rows counted")]
    if not seqs:
        return (*kept, "rows counted: none")
    shown = seqs[:ROWS_SHOWN]
    marks = ",".join("?" * len(shown))
    rows = conn.execute(
        f"SELECT {', '.join(_ROW_COLUMNS)} FROM rule_journal WHERE seq IN ({marks}) ORDER BY seq",
        shown,
    ).fetchall()
    out = [*kept, f"rows counted ({total}):"]
    for seq, at, harness, run, typ, path in rows:
        out.append(
            f"  seq {seq}  {readable_ms(int(at))}  {harness or '-'}  run {run or '-'}  {typ}"
            + (f"  {path}" if path else "")
        )
    if total > len(rows):
        out.append(f"  … and {total - len(rows)} more")
    return tuple(out)


def _demo_reason(line: str, rule: str) -> str:
    if "[memory.rules] enforce of" not in line:
        return line
    head = line.split(f"`{rule}`", 1)[0]
    return (
        f"{head}`{rule}` is enforced in memory by this --demo session"
        " (no harness.toml holds it; nothing is written)"
    )


def _action_lines(conn: sqlite3.Connection, fire_id: int, step: Step) -> tuple[str, ...]:
    """Actions run for the fire, and the hold it created (a hold is an outcome too)."""
    actions: list[dict[str, Any]] = list(step.detail.get("actions", ()))
    lines = list(step.lines) if actions else []
    try:
        holds = conn.execute(
            "SELECT id, harness, released_at, released_by FROM rule_holds WHERE fire_id = ?"
            " ORDER BY id",
            (fire_id,),
        ).fetchall()
    except sqlite3.OperationalError:  # a store from before holds existed
        holds = []
    for hold_id, harness, released_at, released_by in holds:
        state = (
            "active"
            if released_at is None
            else f"released {readable_ms(int(released_at))} by {released_by or '?'}"
        )
        lines.append(
            f"created hold #{hold_id} on {harness} ({state}): new runs refused until released"
        )
    return tuple(lines) or ("no action recorded for this fire, and no hold",)


def explain_backtest_fire(conn: sqlite3.Connection, fire: Fire) -> FireExplanation:
    """Pages for a would-be fire from a backtest (never stored, so its id is 0)."""
    exp = explain_fire_value(conn, fire)
    steps = tuple(ExplainStep(s.kind, s.title, tuple(s.lines)) for s in exp.steps)
    return FireExplanation(0, fire.rule, exp.consistent, steps)
