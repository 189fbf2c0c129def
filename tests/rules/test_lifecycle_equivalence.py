"""The backtest reports the same shadow, suppressed, level and hold outcomes as the live run.

Three simulated fleet days (about 170k rows with ticks) through the starter
pack plus two policy rules: an override of a starter at level stop (new
content: it shadows for the first day, then acts) and a renamed copy of the
restart rule at level hold. Everything is enforced. The live run is cut into
uneven batches and restarted from the store several times (state reloaded as
after a crash or an upgrade); the backtest replays the same rows with fresh
state. Fires (status, effective level and every reason) and hold spans must
be identical.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.config import HarnessConfig, RulesConfig
from engine.fleet.sim import write_fleet
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.holds import list_holds
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle, open_live
from engine.rules.evaluation.backtest import resolve_range
from engine.rules.language.loader import default_sources, load_rules
from engine.store.db import connect

ROOT = Path(__file__).resolve().parents[2]


def policy_rules(tmp: Path) -> Path:
    rules = tmp / "policy"
    rules.mkdir()
    verify = (ROOT / "starter_rules" / "verify_same_failure.yml").read_text()
    (rules / "verify.yml").write_text(verify.replace("level: notify", "level: stop"))
    restart = (ROOT / "starter_rules" / "restart_same_error.yml").read_text()
    (rules / "restart_copy.yml").write_text(
        restart.replace("name: restart_same_error", "name: restart_copy").replace(
            "cooldown: 30m", "cooldown: 10m"
        )
    )
    return rules


def test_live_in_restarted_batches_equals_the_backtest(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    write_fleet(conn, days=3, harnesses=12)
    policy = policy_rules(tmp_path)
    loaded = load_rules(default_sources([policy]), RulesConfig())
    assert not loaded.errors
    rules = list(loaded.rules)
    names = tuple(cr.rule.name for cr in rules)
    rules_cfg = RulesConfig(enforce=names, shadow_period_ms=24 * 3_600_000)
    config = HarnessConfig(rules=rules_cfg)

    sizes = [7919, 20011, 3001, 50000]
    for restart in range(40):
        evaluator, _ = open_live(conn, rules, config)
        rows = sum(evaluator.step(max_rows=sizes[(restart + i) % 4]).rows for i in range(3))
        if rows == 0:
            break
    live = conn.execute(
        "SELECT seq, rule, hash, target, status, effective_level, reasons FROM rule_fires "
        "ORDER BY seq, rule"
    ).fetchall()
    assert (
        conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
        == conn.execute("SELECT seq FROM rule_cursor WHERE name = 'live'").fetchone()[0]
    )

    result = backtest_with_lifecycle(
        conn, rules, resolve_range(conn), Authority.from_rules_config(rules_cfg)
    )
    replay = [
        (f.seq, f.rule, f.hash, f.target, f.status, f.effective_level, json.dumps(list(f.reasons)))
        for f in result.fires
    ]
    assert sorted(replay) == live

    outcomes = {(r, s, lvl) for _, r, _, _, s, lvl, _ in live}
    assert ("verify_same_failure", "shadow", "stop") in outcomes
    assert ("verify_same_failure", "fired", "stop") in outcomes
    assert {("restart_copy", "shadow", "hold"), ("restart_copy", "fired", "hold")} & outcomes
    assert ("restart_same_error", "fired", "hold") in outcomes
    assert any(s == "suppressed" for _, s, _ in outcomes)
    assert any("since the last fire" in r for *_, r in live)

    holds = [
        (h.rule, h.harness, h.event_seq, h.released_seq)
        for h in list_holds(conn, include_released=True)
    ]
    spans = [
        (s["rule"], s["harness"], s["start_seq"], s["end_seq"])
        for s in result.extra["lifecycle"]["hold_spans"]
    ]
    assert sorted(spans, key=str) == sorted(holds, key=str)
    assert holds and all(end is not None for *_, end in holds)
    summary = result.extra["lifecycle"]
    assert summary["by_status"]["shadow"] == sum(1 for f in live if f[4] == "shadow")
