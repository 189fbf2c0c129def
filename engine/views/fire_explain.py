"""Explain a stored fire as pages the console steps through.

The explanation itself (event row, now, rule version, each aggregate call
recomputed from the journal and checked against the stored result, the level
decision, the action outcome) is the rules engine's
``engine.rules.fire_explain.explain_fire``, the same one ``harness rules explain``
prints; this module only shapes it into pages and says whether it is consistent.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from engine.rules.fire_explain import explain_fire as rules_explain_fire
from engine.rules.fire_explain import explain_fire_value
from engine.rules.fires import Fire


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


def explain_fire(conn: sqlite3.Connection, fire_id: int) -> FireExplanation:
    """The pages for ``fire_id``; an unknown id is the engine's InputError."""
    exp = rules_explain_fire(conn, fire_id)
    steps = tuple(ExplainStep(s.kind, s.title, tuple(s.lines)) for s in exp.steps)
    return FireExplanation(fire_id, exp.fire.rule, exp.consistent, steps)


def explain_backtest_fire(conn: sqlite3.Connection, fire: Fire) -> FireExplanation:
    """Pages for a would-be fire from a backtest (never stored, so its id is 0)."""
    exp = explain_fire_value(conn, fire)
    steps = tuple(ExplainStep(s.kind, s.title, tuple(s.lines)) for s in exp.steps)
    return FireExplanation(0, fire.rule, exp.consistent, steps)
