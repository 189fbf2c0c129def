"""The Backtest pane's model: lint an edited copy, replay it, compare with the current version.

The replay is the rules engine's own backtest with the lifecycle wired in
(shadow, suppressed, today's levels), run over recorded history only. When the
operator edited the rule, the current version is replayed over the same range
too, and the pane shows the fires gained and lost, keyed by (seq, target).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import HarnessConfig
from engine.errors import Diagnostic
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation.backtest import BacktestResult, resolve_range
from engine.rules.evaluation.backtest import (
    Progress as Progress,  # what a run reports, for the console
)
from engine.rules.evaluation.fires import Fire as Fire
from engine.rules.evaluation.parity import Parity, compare_live
from engine.rules.language.loader import compile_rule_text
from engine.rules.language.model import CompiledRule as CompiledRule


@dataclass(frozen=True)
class BacktestRun:
    """A finished (or cancelled) backtest and, for an edited rule, the comparison."""

    result: BacktestResult
    baseline: BacktestResult | None
    gained: tuple[Fire, ...]
    lost: tuple[Fire, ...]
    #: True when either replay was cut short: then there is no comparison at all.
    cancelled: bool = False
    #: The result against the live fires stored over the same rows (None if cancelled).
    parity: Parity | None = None

    @property
    def by_status(self) -> dict[str, int]:
        return dict(sorted(Counter(f.status for f in self.result.fires).items()))

    @property
    def per_day(self) -> list[tuple[str, int]]:
        days: Counter[str] = Counter()
        for day, _rule, n in self.result.per_day():
            days[day] += n
        return sorted(days.items())


def lint_candidate(
    text: str, config: HarnessConfig, file: str = "<edited copy>"
) -> tuple[CompiledRule | None, list[Diagnostic]]:
    """Compile an edited rule with the loader the evaluator uses; errors carry line:col."""
    return compile_rule_text(text, file, "file", config.rules)


def _key(f: Fire) -> tuple[int, str]:
    return (f.seq, f.target)


def compare(candidate: BacktestResult, baseline: BacktestResult) -> tuple[tuple[Fire, ...], ...]:
    """Fires the candidate gains and loses against the baseline, by (seq, target)."""
    base = {_key(f) for f in baseline.fires}
    cand = {_key(f) for f in candidate.fires}
    gained = tuple(f for f in candidate.fires if _key(f) not in base)
    lost = tuple(f for f in baseline.fires if _key(f) not in cand)
    return gained, lost


def run_candidate(
    conn: sqlite3.Connection,
    candidate: CompiledRule,
    current: CompiledRule | None,
    config: HarnessConfig,
    *,
    since: str | None = None,
    until: str | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> BacktestRun:
    """Replay ``candidate`` (and ``current`` when it differs) over the chosen range.

    ``since`` is a duration back from the last row; ``until`` a seq, a duration
    back from the last row, or an ISO time (the CLI's ``--since`` / ``--until``).
    """
    seq_range = resolve_range(conn, since=since or None, until=until or None)
    authority = Authority.from_config(config)
    kwargs: dict[str, Any] = {"progress": progress, "cancel": cancel}
    result: BacktestResult = backtest_with_lifecycle(
        conn, [candidate], seq_range, authority, **kwargs
    )
    if result.cancelled:
        return BacktestRun(result, None, (), (), cancelled=True)
    parity = compare_live(conn, result)
    if current is None or current.rule.hash == candidate.rule.hash:
        return BacktestRun(result, None, (), (), parity=parity)
    baseline: BacktestResult = backtest_with_lifecycle(
        conn, [current], seq_range, authority, cancel=cancel
    )
    if baseline.cancelled:
        # A cut-short baseline would turn every fire past the cut into "gained".
        return BacktestRun(result, None, (), (), cancelled=True)
    gained, lost = compare(result, baseline)
    return BacktestRun(result, baseline, gained, lost, parity=parity)
