"""Holds: made with the fire, released by the rule on ticks or by the operator, never a start."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.rules.authority.enforcement import Authority
from engine.rules.authority.holds import check_admission, list_holds, release_by_operator
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle, open_live
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal, config, starter

ROOT = Path(__file__).resolve().parents[2]


def held_store(
    tmp_path: Path, enforce: tuple[str, ...] = ("restart_same_error",)
) -> tuple[sqlite3.Connection, Journal, list[int]]:
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    j.advance(5 * MIN)
    seqs = j.restarts("h1", 3)
    evaluator, _ = open_live(conn, starter(), config(enforce=enforce))
    evaluator.run_until_idle()
    return conn, j, seqs


def test_enforced_hold_rule_creates_a_hold_in_the_fire_transaction(tmp_path: Path) -> None:
    conn, _, seqs = held_store(tmp_path)
    fire = conn.execute("SELECT id, status, effective_level FROM rule_fires").fetchall()
    assert [(s, lvl) for _, s, lvl in fire] == [("fired", "hold")]
    [hold] = list_holds(conn)
    assert (hold.harness, hold.rule, hold.fire_id, hold.event_seq) == (
        "h1",
        "restart_same_error",
        fire[0][0],
        seqs[-1],
    )
    check = check_admission(conn, "h1")
    assert check.held and check.skip_reason == "rule_hold"
    assert "keeps restarting into sha256:" in check.message()
    assert not check_admission(conn, "h2").held


def test_unenforced_hold_rule_acts_at_notify_and_holds_nothing(tmp_path: Path) -> None:
    conn, _, _ = held_store(tmp_path, enforce=())
    [(level, reasons)] = conn.execute("SELECT effective_level, reasons FROM rule_fires")
    assert level == "notify" and "capped at notify" in reasons
    assert list_holds(conn) == []


def test_a_run_start_does_not_release_but_the_rule_does_on_a_tick(tmp_path: Path) -> None:
    conn, j, seqs = held_store(tmp_path)
    first_restart_at = conn.execute(
        "SELECT at FROM rule_journal WHERE seq = ?", (seqs[0],)
    ).fetchone()[0]
    evaluator, _ = open_live(conn, starter(), config(enforce=("restart_same_error",)))
    j.run_event("run_started", "h1", cause=None)
    j.advance(30 * MIN)
    j.run_event("run_started", "h1", cause=None)
    evaluator.run_until_idle()
    assert check_admission(conn, "h1").held
    j.advance(40 * MIN)
    evaluator.run_until_idle()
    [hold] = list_holds(conn, include_released=True)
    assert hold.released_by == "rule" and "no longer matches" in (hold.release_reason or "")
    # released on the first tick whose one-hour window no longer holds the first restart
    assert hold.released_at is not None
    assert first_restart_at + 60 * MIN <= hold.released_at < first_restart_at + 61 * MIN
    kind = conn.execute(
        "SELECT kind FROM rule_journal WHERE seq = ?", (hold.released_seq,)
    ).fetchone()[0]
    assert kind == "tick"
    assert not check_admission(conn, "h1").held


def test_operator_release_with_reason_and_errors(tmp_path: Path) -> None:
    conn, _, _ = held_store(tmp_path)
    [hold] = list_holds(conn)
    done = release_by_operator(conn, hold.id, reason="checked the disk", now_ms=1)
    assert (done.released_by, done.release_reason) == ("operator", "checked the disk")
    assert not check_admission(conn, "h1").held
    with pytest.raises(Exception, match="already released"):
        release_by_operator(conn, hold.id, reason="", now_ms=2)
    with pytest.raises(Exception, match="no hold with id 999"):
        release_by_operator(conn, 999, reason="", now_ms=2)


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_holds_cli_check_list_release(tmp_path: Path) -> None:
    conn, _, _ = held_store(tmp_path)
    conn.close()
    store = str(tmp_path / "s.db")
    held = _harness("holds", "check", "h1", "--store", store)
    assert held.returncode == 3 and "held (rule_hold)" in held.stdout
    assert _harness("holds", "check", "h2", "--store", store).returncode == 0
    listing = json.loads(_harness("holds", "list", "--json", "--store", store).stdout)
    [h] = listing["holds"]
    assert h["harness"] == "h1" and h["active"] and h["skip_reason"] == "rule_hold"
    bad = _harness("holds", "release", "424242", "--store", store)
    assert bad.returncode == 2 and "no hold with id 424242" in bad.stderr
    ok = _harness("holds", "release", str(h["id"]), "--reason", "fixed", "--store", store)
    assert ok.returncode == 0 and "fixed" in ok.stdout
    assert _harness("holds", "check", "h1", "--store", store).returncode == 0


def test_backtest_reports_the_same_hold_span_as_the_live_run(tmp_path: Path) -> None:
    conn, j, _ = held_store(tmp_path)
    evaluator, _ = open_live(conn, starter(), config(enforce=("restart_same_error",)))
    j.advance(90 * MIN)
    j.restarts("h2", 4)
    j.advance(90 * MIN)
    evaluator.run_until_idle()
    live = [
        (h.harness, h.event_seq, h.released_seq) for h in list_holds(conn, include_released=True)
    ]
    from engine.rules.evaluation.backtest import resolve_range

    result = backtest_with_lifecycle(
        conn,
        starter(),
        resolve_range(conn),
        Authority.from_config(config(enforce=("restart_same_error",))),
    )
    spans = result.extra["lifecycle"]["hold_spans"]
    assert [(s["harness"], s["start_seq"], s["end_seq"]) for s in spans] == live
    assert len(live) == 2 and all(end is not None for *_, end in live)
    stored = conn.execute(
        "SELECT seq, rule, status, effective_level FROM rule_fires ORDER BY seq"
    ).fetchall()
    assert [(f.seq, f.rule, f.status, f.effective_level) for f in result.fires] == stored
    assert {s for _, _, s, _ in stored} == {"fired", "suppressed"}
