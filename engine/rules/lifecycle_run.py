"""Wiring the lifecycle into live evaluation and backtests.

Kept apart from :mod:`engine.rules.lifecycle` (the decisions) so that module
stays free of the evaluator and backtest imports: the decisions are pure and
unit-tested alone; these helpers are the one place that assembles a
``LiveEvaluator`` or a backtest with the lifecycle policy, so the console,
``harness evaluate`` and tests cannot wire it differently.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.config import HarnessConfig
from engine.rules.actions import ActionRunner
from engine.rules.holds import iso_ms
from engine.rules.lease import Lease
from engine.rules.lifecycle import (
    FIRED,
    Authority,
    Lifecycle,
    LifecyclePolicy,
    LifecycleState,
)

if TYPE_CHECKING:
    from engine.rules.fires import Fire
    from engine.rules.model import CompiledRule


def open_live(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    config: HarnessConfig,
    *,
    lease: Lease | None = None,
    action_timeout_s: float = 10.0,
    batch_size: int = 500,
) -> tuple[Any, LifecyclePolicy]:
    """A ``LiveEvaluator`` wired to the lifecycle: the one way live evaluation should start.

    Disabled rules are left out, the lifecycle state is loaded from the store,
    actions run from ``[memory.rules.actions]``, and (with ``lease``) a batch
    commits only while the lease is held.
    """
    from engine.rules.evaluator import LiveEvaluator, fast_host_for

    authority = Authority.from_config(config)
    lifecycle = Lifecycle(authority, LifecycleState.load(conn))
    runner = ActionRunner(conn, dict(authority.actions), timeout_s=action_timeout_s)
    policy = LifecyclePolicy(lifecycle, rules, runner=runner, lease=lease, conn=conn)
    active = policy.active_rules(rules)
    policy.rules = {cr.rule.name: cr for cr in active}
    evaluator = LiveEvaluator(
        conn,
        active,
        policy=policy,
        acting=True,
        batch_size=batch_size,
        host_factory=policy.host_factory(fast_host_for),
    )
    return evaluator, policy


def backtest_with_lifecycle(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    seq_range: Any,
    authority: Authority,
    **kwargs: Any,
) -> Any:
    """Backtest with fresh lifecycle state: shadow, suppressed, today's levels, hold spans.

    Returns the backtest's result with ``extra["lifecycle"]`` holding counts by
    status and the simulated hold spans (from tick rows), so the report shows
    what the live evaluator would have done over the same rows.
    """
    from engine.rules.backtest import BacktestResult, run_backtest
    from engine.rules.evaluator import fast_host_for

    policy = LifecyclePolicy(Lifecycle(authority), rules)
    active = policy.active_rules(rules)
    policy.rules = {cr.rule.name: cr for cr in active}
    result: BacktestResult = run_backtest(
        conn,
        active,
        seq_range,
        policy=policy,
        host_factory=policy.host_factory(fast_host_for),
        **kwargs,
    )
    result.extra["lifecycle"] = lifecycle_summary(result.fires, policy)
    return result


def lifecycle_summary(fires: Sequence[Fire], policy: LifecyclePolicy) -> dict[str, Any]:
    """Counts by status and effective level, shadow ends, and hold spans (JSON-ready)."""
    by_status: dict[str, int] = {}
    acting: dict[str, int] = {}
    for f in fires:
        by_status[f.status] = by_status.get(f.status, 0) + 1
        if f.status == FIRED:
            acting[f.effective_level] = acting.get(f.effective_level, 0) + 1
    shadow_until = {
        name: iso_ms(until)
        for name, cr in policy.rules.items()
        if (until := policy.lifecycle.shadow_until(cr.rule)) is not None
    }
    return {
        "by_status": by_status,
        "acting_levels": acting,
        "shadow_until": shadow_until,
        "disabled_by_config": sorted(policy.lifecycle.authority.disable),
        "hold_spans": [
            {
                "rule": s.rule,
                "harness": s.harness,
                "start_seq": s.start_seq,
                "start": iso_ms(s.start_at),
                "end_seq": s.end_seq,
                "end": None if s.end_at is None else iso_ms(s.end_at),
                "duration_ms": s.duration_ms,
            }
            for s in policy.simulated.spans()
        ],
    }
