"""Promotion view: the facts, the backtest as if enforced, the pinned line, and Rules → `e`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import DataTable, Static

from console.panes.promotion import PromotionScreen
from console.panes.rules import RulesPane
from engine.config import HarnessConfig, load_config
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.holds import release_by_operator
from engine.store.db import connect
from engine.views.live import demo_config
from engine.views.promotion import (
    PIN_DIGITS,
    as_enforced,
    enforce_line,
    promotion_header,
    simulate_enforced,
)
from engine.views.rules import load_console_rules
from tests.console.conftest import END_MS, AppFactory, until

TOML = '[memory.rules]\nenforce = ["loop_guard_repeated", "restart_same_error@0000"]\n'


def _rule(policy_dir: Path, name: str, config: HarnessConfig | None = None) -> Any:
    rules = load_console_rules(config or HarnessConfig(), policy_dir).rules
    return next(c for c in rules if c.rule.name == name)


def test_enforce_line_pins_this_version_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(TOML, encoding="utf-8")
    config = load_config(path)
    pin, line = enforce_line(config, "restart_same_error", "ab" * 32)
    assert pin == "restart_same_error@" + ("ab" * 32)[:PIN_DIGITS]
    # the stale pin of the same rule is replaced, the other entry stays
    assert line == f'enforce = ["loop_guard_repeated", "{pin}"]'


def test_as_enforced_grants_this_version_without_shadow(policy_dir: Path) -> None:
    rule = _rule(policy_dir, "loop_guard_repeated")
    config = HarnessConfig()
    auth = as_enforced(config, rule)
    assert auth.enforcement(rule.rule.name, rule.rule.hash)[0]
    assert not auth.enforcement(rule.rule.name, "f" * 64)[0]  # pinned to this version only
    assert auth.shadow_period_ms == 0
    assert not Authority.from_config(config).enforcement(rule.rule.name, rule.rule.hash)[0]


def test_header_says_shadow_and_first_seen(store: Path, policy_dir: Path) -> None:
    conn = connect(store, check_same_thread=False)
    config = demo_config(HarnessConfig())
    shadowed = promotion_header(conn, _rule(policy_dir, "loop_guard_repeated", config), config)
    assert shadowed.source_kind == "policy" and shadowed.in_shadow
    assert shadowed.first_seen_at is not None and shadowed.first_seen_at > 0
    assert "in shadow until" in shadowed.age_line()
    starter = promotion_header(conn, _rule(policy_dir, "file_churn", config), config)
    assert not starter.enforced and not starter.in_shadow and not starter.can_act
    assert "no shadow period" in starter.age_line()
    assert starter.journal_now == conn.execute("SELECT MAX(at) FROM rule_journal").fetchone()[0]


def test_simulate_enforced_finds_the_hold_and_the_operator_release(
    store: Path, policy_dir: Path
) -> None:
    conn = connect(store, check_same_thread=False)
    config = HarnessConfig()  # restart_same_error is not enforced here
    rule = _rule(policy_dir, "restart_same_error", config)
    report = simulate_enforced(conn, rule, config)
    assert [h.harness for h in report.holds] == ["h05"] and report.harnesses == ("h05",)
    assert report.acting.get("hold") == 1 and report.stops == 0
    assert report.holds[0].end_at is None and not report.holds[0].operator_released
    assert report.operator_released_live == 0
    (hold_id,) = conn.execute("SELECT id FROM rule_holds WHERE harness = 'h05'").fetchone()
    release_by_operator(conn, hold_id, reason="false alarm", now_ms=END_MS)
    again = simulate_enforced(conn, rule, config)
    assert again.operator_released_live == 1 and again.holds[0].operator_released
    notify = simulate_enforced(conn, _rule(policy_dir, "verify_same_failure", config), config)
    assert not notify.holds and notify.suppressed > 0
    assert notify.suppressed == sum(1 for f in notify.result.fires if f.status == "suppressed")


async def test_rules_e_opens_the_promotion_view_and_never_writes_the_config(
    make_app: AppFactory, tmp_path: Path
) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(TOML, encoding="utf-8")
    app = make_app(initial="rules", live=False, config=load_config(path))
    async with app.run_test(size=(160, 45)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        index = [r.name for r in rules.rows].index("restart_same_error")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, PromotionScreen))
        screen = app.screen
        assert isinstance(screen, PromotionScreen)
        await until(pilot, lambda: screen.report is not None)
        report = str(screen.query_one("#promotion-report", Static).render())
        assert "would have held: 1 time(s)" in report and "harnesses affected: h05" in report
        line = str(screen.query_one("#promotion-line", Static).render())
        pin = f"restart_same_error@{screen.rule.rule.hash[:PIN_DIGITS]}"
        assert f'enforce = ["loop_guard_repeated", "{pin}"]' in line
        facts = str(screen.query_one("#promotion-facts", Static).render())
        assert "not enforced" in facts and "re-pin" in facts
        await pilot.press("escape")
        assert not isinstance(app.screen, PromotionScreen)
    assert path.read_text(encoding="utf-8") == TOML


async def test_e_on_an_enforced_rule_says_so(make_app: AppFactory) -> None:
    app = make_app(initial="rules", live=False)  # the demo config enforces restart_same_error
    async with app.run_test(size=(120, 36)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        index = [r.name for r in rules.rows].index("restart_same_error")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("e")
        await until(
            pilot, lambda: any("already enforced" in str(n.message) for n in app._notifications)
        )
        assert not isinstance(app.screen, PromotionScreen)


def test_the_demo_line_never_carries_the_in_memory_enforce_entry(
    store: Path, policy_dir: Path
) -> None:
    """Issue 19 P2.1: pasting the line must not grant what only the demo's memory enforces."""
    from engine.views.live import DEMO_ENFORCE

    conn = connect(store, check_same_thread=False)
    config = demo_config(HarnessConfig())
    rule = _rule(policy_dir, "verify_same_failure", config)
    head = promotion_header(conn, rule, config, granted=HarnessConfig())
    assert DEMO_ENFORCE not in head.enforce_line
    assert head.enforce_line == f'enforce = ["{head.pin}"]'
    assert DEMO_ENFORCE in promotion_header(conn, rule, config).enforce_line  # the old line
    conn.close()
