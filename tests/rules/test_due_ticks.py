"""A backtest reads ticks only while the lifecycle has something due, and decides the same.

The reference is the same backtest with hooks that cannot say when they are
due (so every tick is a candidate row and reaches ``on_row``, as before ticks
were read on demand). Fires (status, effective level, every reason) and hold
spans must be identical, on a journal where holds open, are kept by ticks and
are released by ticks, where a non-starter rule version starts its shadow
period at the first tick, and where a tick rule reads ticks of its own; and
the on-demand replay must read far fewer ticks when nothing is due.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import RulesConfig
from engine.fleet.sim import write_fleet
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle import Lifecycle, LifecycleHooks
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation.backtest import resolve_range
from engine.rules.evaluation.hooks import FireDecision, RowView
from engine.rules.language.model import CompiledRule, Rule
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal, rule_from_text, starter
from tests.rules.test_lifecycle_equivalence import policy_rules


class AlwaysDue:
    """LifecycleHooks without ``due``: every tick is read and handed to ``on_row``."""

    def __init__(self, inner: LifecycleHooks) -> None:
        self.inner = inner
        self.row_kinds = inner.row_kinds

    def host_factory(self, make: Any) -> Any:
        return self.inner.host_factory(make)

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        return self.inner.on_match(rule, target, row, now_ms)

    def on_row(self, row: RowView, conn: Any) -> None:
        self.inner.on_row(row, conn)

    def before_commit(self, fires: Any, conn: Any) -> None:
        self.inner.before_commit(fires, conn)

    def after_commit(self, fires: Any) -> None:
        self.inner.after_commit(fires)


def _outcome(result: Any, hooks: LifecycleHooks) -> tuple[list[Any], list[Any]]:
    fires = [
        (f.seq, f.rule, f.hash, f.target, f.status, f.effective_level, f.reasons, f.key())
        for f in result.fires
    ]
    spans = [
        (s.rule, s.harness, s.event_seq, s.start_seq, s.end_seq, s.end_reason)
        for s in hooks.simulated.spans()
    ]
    return fires, spans


def both(
    conn: Any, rules: list[CompiledRule], authority: Authority, **kw: Any
) -> tuple[Any, Any, Any, Any]:
    """The on-demand backtest and the every-tick one, with their hooks."""
    rng = resolve_range(conn, **kw)
    fast_hooks = LifecycleHooks(Lifecycle(authority), rules)
    from engine.rules.evaluation.backtest import run_backtest

    fast = run_backtest(conn, rules, rng, hooks=fast_hooks, wrap_host=fast_hooks.host_factory)
    ref_inner = LifecycleHooks(Lifecycle(authority), rules)
    ref = run_backtest(
        conn,
        rules,
        rng,
        hooks=AlwaysDue(ref_inner),  # type: ignore[arg-type]
        wrap_host=ref_inner.host_factory,
    )
    return fast, fast_hooks, ref, ref_inner


def test_holds_opened_kept_and_released_by_ticks_are_the_same(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    for _ in range(3):
        j.advance(30 * MIN)
        j.restarts("h1", 4)  # a hold opens; ticks keep it an hour, then release it
        j.advance(5 * MIN)
        j.restarts("h2", 3, gap_ms=2 * MIN)
        j.advance(3 * 60 * MIN)  # long quiet stretches: no hold open, nothing due
    conn.commit()
    rules = starter()
    authority = Authority.from_rules_config(RulesConfig(enforce=("restart_same_error",)))
    fast, fast_hooks, ref, ref_hooks = both(conn, rules, authority)
    assert _outcome(fast, fast_hooks) == _outcome(ref, ref_hooks)
    spans = fast_hooks.simulated.spans()
    assert len(spans) >= 3 and all(s.end_seq is not None for s in spans)
    ticks = conn.execute("SELECT count(*) FROM rule_journal WHERE kind = 'tick'").fetchone()[0]
    restarts = conn.execute("SELECT count(*) FROM rule_journal WHERE kind != 'tick'").fetchone()[0]
    # The reference reads every tick; on demand only those while a hold is open.
    assert ref.rows_scanned >= ticks
    assert restarts < fast.rows_scanned < ref.rows_scanned - ticks // 2


def test_nothing_enforced_reads_one_tick_for_the_shadow_start(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    j.advance(10 * MIN)
    j.restarts("h1", 4)
    j.advance(120 * MIN)
    j.restarts("h1", 4)
    conn.commit()
    shadowed = rule_from_text(
        tmp_path,
        "name: mine\non: run_event\n"
        'when: \'event.type == "restart" && count({"harness": event.harness, "type": '
        '"restart"}, duration("1h")) >= 2\'\nlevel: notify\ntarget: harness\n'
        "cooldown: 0s\nmessage: m\n",
    )
    rules = [*starter(), shadowed]
    authority = Authority.from_rules_config(RulesConfig(shadow_period_ms=60 * MIN))
    fast, fast_hooks, ref, ref_hooks = both(conn, rules, authority)
    assert _outcome(fast, fast_hooks) == _outcome(ref, ref_hooks)
    statuses = {f.status for f in fast.fires if f.rule == "mine"}
    assert statuses == {"shadow", "fired"}  # the first tick started the shadow period
    assert fast.rows_scanned == fast.rows_evaluated + 1  # the candidates and that tick


def test_a_tick_rule_still_sees_the_ticks_it_matches(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    for _ in range(4):
        j.advance(20 * MIN)
        j.restarts("h1", 2, gap_ms=MIN)
    conn.commit()
    tick_rule = rule_from_text(
        tmp_path,
        "name: restarts_now\non: tick\n"
        'when: \'count({"type": "restart"}, duration("5m")) >= 2\'\n'
        "level: annotate\ntarget: type\ncooldown: 0s\nmessage: m\n",
        kind="starter",
    )
    rules = [*starter(), tick_rule]
    authority = Authority.from_rules_config(RulesConfig(enforce=("restart_same_error",)))
    fast, fast_hooks, ref, ref_hooks = both(conn, rules, authority)
    assert _outcome(fast, fast_hooks) == _outcome(ref, ref_hooks)
    assert any(f.rule == "restarts_now" for f in fast.fires)


@pytest.mark.slow
def test_fleet_days_with_policy_rules_enforced(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    write_fleet(conn, days=2, harnesses=8)
    from engine.rules.language.loader import default_sources, load_rules

    rules = list(load_rules(default_sources([policy_rules(tmp_path)]), RulesConfig()).rules)
    names = tuple(cr.rule.name for cr in rules)
    authority = Authority.from_rules_config(
        RulesConfig(enforce=names, shadow_period_ms=12 * 3_600_000)
    )
    fast, fast_hooks, ref, ref_hooks = both(conn, rules, authority)
    assert _outcome(fast, fast_hooks) == _outcome(ref, ref_hooks)
    assert fast_hooks.simulated.spans()
    # From the middle of the range too (fresh state: the first tick there starts shadow).
    mid = conn.execute("SELECT max(seq) / 2 FROM rule_journal").fetchone()[0]
    fast, fast_hooks, ref, ref_hooks = both(conn, rules, authority, from_seq=mid)
    assert _outcome(fast, fast_hooks) == _outcome(ref, ref_hooks)
    summary = backtest_with_lifecycle(conn, rules, resolve_range(conn), authority)
    assert summary.rows_scanned < ref.rows_scanned + 1
