"""engine/views: the read models behind the console, tested without a screen."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.config import HarnessConfig
from engine.errors import InputError
from engine.store.db import connect
from engine.views.decide import append_scenario, load_spec, scenario_results, try_input
from engine.views.fires import (
    FireFilter,
    count_after,
    fires_after,
    fires_before,
    latest_fire_id,
    parse_filter,
)
from engine.views.fleet import fleet_summary, format_age, harness_names
from engine.views.holds import list_holds
from engine.views.live import demo_config
from engine.views.rules import keep_last_good, load_console_rules, rule_rows
from engine.views.session import ConsoleOptions, classify_change
from tests.console.conftest import END_MS, SPEC_TEXT


def _conn(store: Path) -> sqlite3.Connection:
    return connect(store)


def test_parse_filter_keys_and_bare_word() -> None:
    flt = parse_filter("level:hold harness:h05 restart_same")
    assert flt == FireFilter(level="hold", harness="h05", words=("restart_same",))
    assert parse_filter("").empty


def test_parse_filter_rejects_unknown_key_with_column() -> None:
    with pytest.raises(InputError) as err:
        parse_filter("level:hold colour:red")
    diag = err.value.diagnostics[0]
    assert diag.location.col == len("level:hold ") + 1
    assert "colour" in diag.message


def test_fire_pages_are_keyset_and_filtered(store: Path) -> None:
    conn = _conn(store)
    total = conn.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0]
    assert total >= 10
    newest = fires_before(conn, FireFilter(), None, limit=4)
    assert [f.id for f in newest] == sorted(f.id for f in newest)
    assert newest[-1].id == latest_fire_id(conn)
    older = fires_before(conn, FireFilter(), newest[0].id, limit=4)
    assert older[-1].id < newest[0].id
    assert [f.id for f in fires_after(conn, FireFilter(), older[-1].id, 4)] == [
        f.id for f in newest
    ]
    holds = fires_before(conn, FireFilter(level="hold"), None, limit=100)
    expected = conn.execute(
        "SELECT COUNT(*) FROM rule_fires WHERE effective_level = 'hold'"
    ).fetchone()[0]
    assert len(holds) == expected and all(f.effective_level == "hold" for f in holds)
    by_harness = fires_before(conn, FireFilter(harness="h05"), None, limit=100)
    assert by_harness and all(f.target == "h05" for f in by_harness)
    assert count_after(conn, FireFilter(), older[-1].id) == 4


def test_fire_json_has_parsed_reasons_and_calls(store: Path) -> None:
    conn = _conn(store)
    fire = fires_before(conn, FireFilter(rule="restart_same_error"), None, 1)[0]
    doc = fire.to_json()
    assert isinstance(doc["reasons"], list) and doc["reasons"]
    assert doc["calls"][0]["fn"] == "count"
    json.dumps(doc)


def test_fleet_summary_states_and_activity(store: Path) -> None:
    conn = _conn(store)
    rows = {r.harness: r for r in fleet_summary(conn, END_MS)}
    assert sorted(rows) == harness_names(conn) == [f"h{i:02d}" for i in range(1, 13)]
    assert rows["h05"].state == "held"
    assert rows["h05"].fires_24h >= 1
    assert rows["h01"].project == "atlas" and rows["h12"].project == "delta"
    assert all(len(r.activity) == 24 for r in rows.values())
    assert sum(rows["h01"].activity) > 0
    assert {r.state for r in rows.values()} <= {"running", "idle", "held", "stopped"}


def test_format_age() -> None:
    assert format_age(-1) == "-"
    assert format_age(59_000) == "59s"
    assert format_age(3 * 3_600_000 + 5) == "3h"


def test_holds_listing_active_first(store: Path) -> None:
    rows = list_holds(_conn(store), now_ms=END_MS)
    assert rows and rows[0].active and rows[0].harness == "h05"


def test_rule_rows_state_and_levels(store: Path, policy_dir: Path) -> None:
    config = demo_config(HarnessConfig())
    loaded = load_console_rules(config, policy_dir)
    rows = {r.name: r for r in rule_rows(_conn(store), [c.rule for c in loaded.rules], config)}
    assert rows["restart_same_error"].state == "enforced"
    assert rows["restart_same_error"].effective_level == "hold"
    assert rows["loop_guard_repeated"].state == "shadow"
    assert rows["loop_guard_repeated"].source_kind == "policy"
    conn = _conn(store)
    for name, row in rows.items():
        stored = dict(
            conn.execute(
                "SELECT status = 'suppressed', COUNT(*) FROM rule_fires WHERE rule = ? GROUP BY 1",
                (name,),
            ).fetchall()
        )
        assert row.fires == stored.get(0, 0)
        assert row.suppressed >= stored.get(1, 0)
    assert rows["verify_same_failure"].suppressed > 0
    assert rows["file_collision"].state == "active"
    plain = HarnessConfig()
    capped = {r.name: r for r in rule_rows(_conn(store), [c.rule for c in loaded.rules], plain)}
    assert capped["restart_same_error"].effective_level == "notify"
    assert capped["restart_same_error"].state != "enforced"


def test_keep_last_good_keeps_a_broken_policy_rule(tmp_path: Path) -> None:
    config = HarnessConfig()
    rule = tmp_path / "only_here.yml"
    rule.write_text(
        "name: only_here\non: tick\nwhen: event.type == 'tick'\nlevel: annotate\ntarget: type\n",
        encoding="utf-8",
    )
    good = load_console_rules(config, tmp_path)
    assert "only_here" in {c.rule.name for c in good.rules}
    rule.write_text("name: only_here\non: tick\nwhen: event.nope ==\n", encoding="utf-8")
    broken = load_console_rules(config, tmp_path)
    assert "only_here" not in {c.rule.name for c in broken.rules}
    merged = keep_last_good(good, broken)
    assert "only_here" in {c.rule.name for c in merged.rules}
    assert merged.errors == broken.errors


def test_decide_and_append_scenario_keeps_comments(tmp_path: Path) -> None:
    path = tmp_path / "skill.spec.yml"
    path.write_text(SPEC_TEXT, encoding="utf-8")
    spec = load_spec(path)
    result = try_input(spec, "could you fill the form please")
    assert result.decision.route == "fill_pdf_form"
    matched = [r for r in result.rules if r.matched]
    assert [r.id for r in matched] == ["form_requests_fill"]
    saved = append_scenario(spec, "console saved", result.decision)
    text = path.read_text(encoding="utf-8")
    assert text.startswith(SPEC_TEXT.split("# trailing comment")[0])
    assert "# form requests go to the form route" in text
    assert text.rstrip().endswith("# trailing comment")
    run = scenario_results(saved)
    assert [(r.name, r.passed) for r in run.results] == [
        ("form request fills", True),
        ("console saved", True),
    ]


def test_append_scenario_refuses_flow_list_and_stale_file(tmp_path: Path) -> None:
    path = tmp_path / "skill.spec.yml"
    flow = SPEC_TEXT.split("tests:")[0] + "tests: []\n"
    path.write_text(flow, encoding="utf-8")
    spec = load_spec(path)
    decision = try_input(spec, "fill the form").decision
    with pytest.raises(InputError, match="flow"):
        append_scenario(spec, "x", decision)
    assert path.read_text(encoding="utf-8") == flow
    path.write_text(SPEC_TEXT, encoding="utf-8")
    with pytest.raises(InputError, match="changed on disk"):
        append_scenario(spec, "x", decision)


def test_append_scenario_adds_tests_key_when_missing(tmp_path: Path) -> None:
    path = tmp_path / "skill.spec.yml"
    path.write_text(SPEC_TEXT.split("tests:")[0].rstrip() + "\n", encoding="utf-8")
    spec = load_spec(path)
    saved = append_scenario(spec, "first", try_input(spec, "fill the form").decision)
    assert [r.name for r in scenario_results(saved).results] == ["first"]


def test_classify_change(tmp_path: Path) -> None:
    specs = tmp_path / "skills"
    specs.mkdir()
    policy = tmp_path / "policy"
    policy.mkdir()
    cfg_file = tmp_path / "cfg" / "harness.toml"
    options = ConsoleOptions(
        store_path=tmp_path / "j.db",
        spec_globs=(str(specs / "*.spec.yml"),),
        policy_dir=policy,
        config_file=cfg_file,
    )
    assert classify_change(options, specs / "a.spec.yml") == {"spec"}
    assert classify_change(options, policy / "r.yml") == {"rules"}
    assert classify_change(options, cfg_file) == {"config"}
    assert classify_change(options, specs / "notes.txt") == set()
    assert classify_change(options, policy / "nested" / "r.yml") == set()
    deep = ConsoleOptions(
        store_path=tmp_path / "j.db", spec_globs=(str(specs / "**" / "skill.spec.yml"),)
    )
    assert classify_change(deep, specs / "a" / "b" / "skill.spec.yml") == {"spec"}
    assert specs in deep.watch_dirs()
    assert policy in options.watch_dirs() and specs in options.watch_dirs()


def test_fire_counter_is_incremental(store: Path) -> None:
    from engine.views.rules import FireCounter

    conn = _conn(store)
    counter = FireCounter()
    counter.update(conn)
    before = dict(counter.fires)
    seq = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    conn.execute(
        "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level, status,"
        " reasons, calls) VALUES ('file_churn', 'h', ?, 0, 'x', 'notify', 'notify',"
        " 'suppressed', '[]', '[]')",
        (seq,),
    )
    suppressed = counter.suppressed.get("file_churn", 0)
    counter.update(conn)
    assert counter.fires == before
    assert counter.suppressed["file_churn"] == suppressed + 1


def test_backtest_compare_and_cancel(store: Path, policy_dir: Path) -> None:
    import threading

    from engine.views.backtest import lint_candidate, run_candidate

    config = demo_config(HarnessConfig())
    current = next(
        c
        for c in load_console_rules(config, policy_dir).rules
        if c.rule.name == "verify_same_failure"
    )
    looser, errors = lint_candidate(current.rule.text.replace(">= 3", ">= 2"), config)
    assert looser is not None and not errors
    conn = _conn(store)
    run = run_candidate(conn, looser, current, config)
    assert run.baseline is not None
    base_keys = {(f.seq, f.target) for f in run.baseline.fires}
    new_keys = {(f.seq, f.target) for f in run.result.fires}
    assert {(f.seq, f.target) for f in run.gained} == new_keys - base_keys
    assert {(f.seq, f.target) for f in run.lost} == base_keys - new_keys
    assert run.gained and sum(run.by_status.values()) == len(run.result.fires)
    assert sum(n for _, n in run.per_day) == len(run.result.fires)
    cancel = threading.Event()
    cancel.set()
    stopped = run_candidate(conn, looser, current, config, cancel=cancel)
    assert stopped.result.cancelled and stopped.baseline is None
    bad, errors = lint_candidate("name: x\non: run_event\nwhen: event.nope == 1\n", config)
    assert bad is None and errors and errors[0].location.line >= 1


def test_fleet_stopped_after_a_stop_fire(store: Path) -> None:
    conn = _conn(store)
    seq, at = conn.execute(
        "SELECT seq, at FROM rule_journal WHERE harness = 'h07' ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    conn.execute(
        "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level, status,"
        " reasons, calls) VALUES ('stopper', 'h', ?, ?, 'h07', 'stop', 'stop', 'fired',"
        " '[]', '[]')",
        (seq, at),
    )
    rows = {r.harness: r for r in fleet_summary(conn, END_MS)}
    assert rows["h07"].state == "stopped"
    conn.execute("UPDATE rule_fires SET status = 'shadow' WHERE rule = 'stopper'")
    rows = {r.harness: r for r in fleet_summary(conn, END_MS)}
    assert rows["h07"].state != "stopped"  # a shadow stop never acted


def test_backtest_until_bounds_the_range(store: Path, policy_dir: Path) -> None:
    from engine.views.backtest import run_candidate

    config = demo_config(HarnessConfig())
    rule = next(
        c
        for c in load_console_rules(config, policy_dir).rules
        if c.rule.name == "verify_same_failure"
    )
    conn = _conn(store)
    full = run_candidate(conn, rule, rule, config)
    cut = int(full.result.fires[len(full.result.fires) // 2].seq)
    half = run_candidate(conn, rule, rule, config, until=str(cut))
    assert half.result.range.last_seq == cut
    assert [f.seq for f in half.result.fires] == [f.seq for f in full.result.fires if f.seq <= cut]


def test_rule_rows_disabled_by_config_and_by_error(store: Path, policy_dir: Path) -> None:

    config = demo_config(HarnessConfig())
    rules = [c.rule for c in load_console_rules(config, policy_dir).rules]
    conn = _conn(store)
    conn.execute(
        "INSERT OR REPLACE INTO rule_state (name, hash, state, error, updated_at)"
        " VALUES ('file_churn', 'x', 'disabled', 'cost limit exceeded', 0)"
    )
    silenced = config.replace(rules=config.rules.replace(disable=("file_collision",)))
    rows = {r.name: r for r in rule_rows(conn, rules, silenced)}
    assert rows["file_churn"].state == "disabled"
    assert rows["file_churn"].error == "cost limit exceeded"
    assert rows["file_collision"].state == "disabled"
    assert "disable" in rows["file_collision"].state_detail
