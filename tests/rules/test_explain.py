"""Explain: steps in order, aggregates recomputed from the journal, counted seqs, mismatches."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.cli.harness import main as harness
from engine.rules.evaluation.fire_explain import cel_duration, explain_fire
from engine.rules.evaluation.live_evaluator import LiveEvaluator
from engine.store.db import connect
from tests.rules.test_evaluator import CAUSE, MIN, RESTART_RULE, T0, insert, make_rule, row

VERIFY = (
    'event.type == "verify_failed" && distinct("run", {"type": "verify_failed",'
    ' "cause_digest": event.cause_digest}, duration("24h")) >= 3'
)


@pytest.fixture
def fired(tmp_path: Path) -> tuple[Path, int]:
    path = tmp_path / "x.db"
    conn = connect(path)
    rows = [
        row(T0, "restart", cause_digest=CAUSE),  # 1
        row(T0 + 1, "restart", harness="h2", cause_digest=CAUSE),  # 2 other harness
        row(T0 + 2 * MIN, "restart", cause_digest=CAUSE),  # 3
        row(T0 + 3 * MIN, "tool_call", tool="bash"),  # 4
        row(T0 + 4 * MIN, "restart", cause_digest=CAUSE),  # 5 -> fires, counts 1, 3, 5
        row(T0 + 5 * MIN, "verify_failed", run="r1", cause_digest=CAUSE),  # 6
        row(T0 + 6 * MIN, "verify_failed", run="r1", cause_digest=CAUSE),  # 7
        row(T0 + 7 * MIN, "verify_failed", run="r2", cause_digest=CAUSE),  # 8
        row(T0 + 8 * MIN, "verify_failed", run="r3", cause_digest=CAUSE),  # 9 -> fires
    ]
    insert(conn, rows)
    rules = [
        make_rule("restart_same_error", RESTART_RULE, level="hold"),
        make_rule("verify_same", VERIFY),
    ]
    fires = LiveEvaluator(conn, rules).run_until_idle()
    assert [(f.rule, f.seq) for f in fires] == [("restart_same_error", 5), ("verify_same", 9)]
    assert fires[0].id is not None
    return path, fires[0].id


def test_explanation_steps_recompute_each_aggregate_and_list_counted_seqs(
    fired: tuple[Path, int],
) -> None:
    path, fire_id = fired
    conn = connect(path)
    ex = explain_fire(conn, fire_id)
    assert [s.kind for s in ex.steps] == ["event", "now", "rule", "call", "decision", "actions"]
    event, now, rule, call, decision, _actions = ex.steps
    assert event.detail["row"]["seq"] == 5 and event.detail["row"]["cause_digest"] == CAUSE
    assert now.detail["now_ms"] == T0 + 4 * MIN
    assert rule.detail["hash"] == ex.fire.hash and "count(" in rule.detail["text"]
    assert rule.detail["file"] == "restart_same_error.yml"
    assert call.detail["stored_result"] == 3 and call.detail["recomputed"] == 3
    assert call.detail["seqs"] == [1, 3, 5]  # not 2 (other harness), not 4 (a tool call)
    assert call.detail["equal"] is True
    assert decision.detail["effective_level"] == "notify"
    assert any("not enforced" in r for r in decision.detail["reasons"])
    assert ex.consistent


def test_distinct_explanation_lists_values(fired: tuple[Path, int]) -> None:
    path, fire_id = fired
    ex = explain_fire(connect(path), fire_id + 1)
    (call,) = [s for s in ex.steps if s.kind == "call"]
    assert call.detail["recomputed"] == 3
    assert call.detail["distinct_values"] == ["r1", "r2", "r3"]
    assert call.detail["seqs"] == [6, 7, 8, 9]
    assert 'duration("24h")' in "\n".join(call.lines)


def test_a_pruned_counted_row_shows_as_a_mismatch_and_fails_the_cli(
    fired: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, fire_id = fired
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM rule_journal WHERE seq = 1")
    raw.commit()
    ex = explain_fire(connect(path), fire_id)
    (call,) = [s for s in ex.steps if s.kind == "call"]
    assert (call.detail["stored_result"], call.detail["recomputed"]) == (3, 2)
    assert not ex.consistent
    code = harness(["rules", "explain", str(fire_id), "--store", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and "MISMATCH" in out


def test_cli_explain_json_and_unknown_fire(
    fired: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, fire_id = fired
    assert harness(["rules", "explain", str(fire_id), "--store", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["consistent"] is True
    assert [s["kind"] for s in data["steps"]][:3] == ["event", "now", "rule"]
    assert data["fire"]["rule"] == "restart_same_error"
    assert harness(["rules", "explain", "999", "--store", str(path)]) == 2
    assert "no fire with id 999" in capsys.readouterr().err


def test_cel_duration_spelling() -> None:
    assert cel_duration(86_400_000) == "24h"
    assert cel_duration(5_400_000) == "1h30m"
    assert cel_duration(90_000) == "1m30s"
    assert cel_duration(0) == "0s"
