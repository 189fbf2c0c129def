"""Wiring the lifecycle into live evaluation and backtests.

Kept apart from :mod:`engine.rules.authority.lifecycle` (the decisions) so that module
stays free of the evaluator and backtest imports: the decisions are pure and
unit-tested alone; these helpers are the one place that assembles a
``LiveEvaluator`` or a backtest with the lifecycle hooks, so the console,
``harness evaluate`` and tests cannot wire it differently.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from engine.config import HarnessConfig, config_signature, load_config
from engine.errors import HarnessError
from engine.rules.authority.actions import ActionRunner
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lease import Lease
from engine.rules.authority.lifecycle import Lifecycle, LifecycleHooks, LifecycleState
from engine.timefmt import iso_ms
from engine.vocab import FIRED

if TYPE_CHECKING:
    from engine.rules.evaluation.fires import Fire
    from engine.rules.language.model import CompiledRule


class ConfigWatch:
    """Re-reads the global config file when it changes; a broken edit keeps the last good one.

    One watch per config file per process, so an evaluator rebuilt from the
    config object it started with (the console, ``harness evaluate``) still
    gets the newest valid config. ``error`` holds the current edit's problem.
    """

    _watches: ClassVar[dict[Path, ConfigWatch]] = {}

    def __init__(self, config: HarnessConfig) -> None:
        assert config.source is not None
        self.path = config.source
        self.base = config
        self.good = config
        self.stamp = config_signature(self.path)
        self.error: str | None = None

    @classmethod
    def for_config(cls, config: HarnessConfig) -> ConfigWatch | None:
        """The watch for a config loaded from a file (None for an in-memory config)."""
        if config.source is None:
            return None
        watch = cls._watches.get(config.source)
        if watch is None or watch.base != config:
            watch = cls._watches[config.source] = cls(config)
        return watch

    def poll(self) -> HarnessConfig:
        stamp = config_signature(self.path)
        if stamp != self.stamp:
            self.stamp = stamp
            try:
                self.good = load_config(self.path)
                self.error = None
            except HarnessError as exc:
                self.error = str(exc)
                sys.stderr.write(f"harness.toml not reloaded, keeping the last good one:\n{exc}\n")
        return self.good

    def authority(self) -> Authority:
        return Authority.from_config(self.poll())


def open_live(
    conn: sqlite3.Connection,
    rules: Sequence[CompiledRule],
    config: HarnessConfig,
    *,
    lease: Lease | None = None,
    action_timeout_s: float = 10.0,
    batch_size: int = 500,
) -> tuple[Any, LifecycleHooks]:
    """A ``LiveEvaluator`` wired to the lifecycle: the one way live evaluation should start.

    Disabled rules are left out, the lifecycle state is loaded from the store,
    actions run from ``[memory.rules.actions]``, and (with ``lease``) a batch
    commits only while the lease is held.
    """
    from engine.rules.evaluation.evaluator import fast_host_for
    from engine.rules.evaluation.live_evaluator import LiveEvaluator

    watch = ConfigWatch.for_config(config)
    authority = watch.authority() if watch is not None else Authority.from_config(config)
    lifecycle = Lifecycle(authority, LifecycleState.load(conn))
    runner = ActionRunner(conn, dict(authority.actions), timeout_s=action_timeout_s)
    hooks = LifecycleHooks(lifecycle, rules, runner=runner, lease=lease, conn=conn)
    if watch is not None:
        hooks.watch = watch.authority
    active = hooks.active_rules(rules)
    hooks.rules = {cr.rule.name: cr for cr in active}
    evaluator = LiveEvaluator(
        conn,
        active,
        hooks=hooks,
        acting=True,
        batch_size=batch_size,
        host_factory=hooks.host_factory(fast_host_for),
    )
    return evaluator, hooks


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
    from engine.rules.evaluation.backtest import BacktestResult, run_backtest

    hooks = LifecycleHooks(Lifecycle(authority), rules)
    active = hooks.active_rules(rules)
    hooks.rules = {cr.rule.name: cr for cr in active}
    result: BacktestResult = run_backtest(
        conn, active, seq_range, hooks=hooks, wrap_host=hooks.host_factory, **kwargs
    )
    result.extra["lifecycle"] = lifecycle_summary(result.fires, hooks)
    return result


def lifecycle_summary(fires: Sequence[Fire], hooks: LifecycleHooks) -> dict[str, Any]:
    """Counts by status and effective level, shadow ends, and hold spans (JSON-ready)."""
    by_status: dict[str, int] = {}
    acting: dict[str, int] = {}
    for f in fires:
        by_status[f.status] = by_status.get(f.status, 0) + 1
        if f.status == FIRED:
            acting[f.effective_level] = acting.get(f.effective_level, 0) + 1
    shadow_until = {
        name: iso_ms(until)
        for name, cr in hooks.rules.items()
        if (until := hooks.lifecycle.shadow_until(cr.rule)) is not None
    }
    return {
        "by_status": by_status,
        "acting_levels": acting,
        "shadow_until": shadow_until,
        "disabled_by_config": sorted(hooks.lifecycle.authority.disable),
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
            for s in hooks.simulated.spans()
        ],
    }
