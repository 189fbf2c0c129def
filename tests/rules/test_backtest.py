"""Backtest: ranges, warm start, no future rows, cancel/progress, caveats, and the CLI."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from engine.cli.harness import main as harness
from engine.rules.evaluation.backtest import (
    ON_RECORDED_HISTORY,
    SILENT_NOTE,
    Progress,
    resolve_range,
    run_backtest,
)
from engine.rules.evaluation.live_evaluator import LiveEvaluator
from engine.store.db import connect
from tests.rules.test_evaluator import CAUSE, MIN, RESTART_RULE, T0, insert, make_rule, row

HOUR = 60 * MIN


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return restart_journal(tmp_path / "bt.db")


def restart_journal(path: Path) -> Path:
    """Restarts of h1 every 10 minutes for 10 hours, tool calls between, a tick a minute."""
    conn = connect(path)
    rows = []
    for minute in range(600):
        at = T0 + minute * MIN
        rows.append(row(at, "tick"))
        if minute % 10 == 0:
            rows.append(row(at + 1, "restart", cause_digest=CAUSE))
        rows.append(row(at + 2, "tool_call", tool="bash"))
    insert(conn, rows)
    conn.close()
    return path


def test_resolve_range_counts_back_in_journal_time(store_path: Path) -> None:
    conn = connect(store_path)
    whole = resolve_range(conn)
    assert (whole.first_seq, whole.last_seq, whole.rows) == (1, 1260, 1260)
    last_at = whole.last_at
    since = resolve_range(conn, since="1h")
    assert since.first_at > last_at - HOUR
    first_before = conn.execute("SELECT at FROM rule_journal WHERE seq = ?", (since.first_seq - 1,))
    assert first_before.fetchone()[0] <= last_at - HOUR
    assert resolve_range(conn, from_seq=100, until="199").rows == 100
    until_dur = resolve_range(conn, until="2h")
    assert until_dur.last_at <= last_at - 2 * HOUR
    iso = resolve_range(conn, until="2026-01-01T01:00:00Z")
    assert iso.last_at <= T0 + HOUR
    with pytest.raises(Exception, match="exclusive"):
        resolve_range(conn, since="1h", from_seq=3)
    with pytest.raises(Exception, match="--until"):
        resolve_range(conn, until="yesterday-ish")


def test_backtest_from_a_later_seq_warms_the_window_like_live(store_path: Path) -> None:
    conn = connect(store_path)
    rule = make_rule("r", RESTART_RULE, cooldown="0s")
    live = LiveEvaluator(conn, [rule]).run_until_idle()
    assert live
    start = 700
    part = run_backtest(conn, [rule], resolve_range(conn, from_seq=start))
    assert [f.key() for f in part.fires] == [f.key() for f in live if f.seq >= start]
    # Without the warm-up the first restarts in range would count fewer than 3.
    assert part.fires[0].calls[0].result >= 3


def test_a_row_with_the_same_at_but_a_later_seq_is_never_seen(tmp_path: Path) -> None:
    conn = connect(tmp_path / "same.db")
    insert(conn, [row(T0, "restart", cause_digest=CAUSE) for _ in range(5)])
    rule = make_rule("r", RESTART_RULE, cooldown="0s")
    result = run_backtest(conn, [rule], resolve_range(conn))
    assert [(f.seq, f.calls[0].result) for f in result.fires] == [(3, 3), (4, 4), (5, 5)]


def test_progress_and_cancel_between_batches(store_path: Path) -> None:
    conn = connect(store_path)
    rule = make_rule("r", RESTART_RULE)
    seen: list[Progress] = []
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        seen.append(p)
        if p.rows_done >= 30:
            cancel.set()

    result = run_backtest(
        conn, [rule], resolve_range(conn), progress=progress, cancel=cancel, batch=10
    )
    assert result.cancelled
    assert result.rows_scanned == 30
    assert [p.rows_done for p in seen] == [10, 20, 30]
    # Progress counts candidate rows: at most the 60 restarts (fewer when the rule's
    # threshold is tested in SQL), not the 1,260 rows of the range; exactly what a
    # whole run reads.
    whole = run_backtest(conn, [rule], resolve_range(conn))
    assert all(p.rows_total == whole.rows_scanned for p in seen)
    assert 30 < whole.rows_scanned <= 60


def test_without_the_prefilter_progress_counts_every_row(store_path: Path) -> None:
    conn = connect(store_path)
    rule = make_rule("r", RESTART_RULE)
    seen: list[Progress] = []
    result = run_backtest(
        conn, [rule], resolve_range(conn), progress=seen.append, batch=500, prefilter=False
    )
    assert [p.rows_done for p in seen] == [500, 1000, 1260]
    assert all(p.rows_total == 1260 for p in seen)
    # CEL runs on 58 of the 60 restarts: on the first two, fewer than 3 restarts are in
    # the window, so the rule's count gate fails before CEL is asked.
    assert (result.rows_scanned, result.rows_evaluated) == (1260, 58)
    filtered = run_backtest(conn, [rule], resolve_range(conn), replay="window")
    assert (filtered.rows_scanned, filtered.rows_evaluated) == (60, 58)
    assert [f.key() for f in filtered.fires] == [f.key() for f in result.fires]
    # Testing the gate in SQL leaves those two restarts unread.
    in_sql = run_backtest(conn, [rule], resolve_range(conn), replay="sql")
    assert (in_sql.rows_scanned, in_sql.rows_evaluated) == (58, 58)
    assert [f.key() for f in in_sql.fires] == [f.key() for f in result.fires]


def test_result_says_on_recorded_history_and_names_silent_rules(store_path: Path) -> None:
    conn = connect(store_path)
    loud = make_rule("loud", RESTART_RULE)
    silent = make_rule("silent", 'event.type == "loop_stopped"')
    result = run_backtest(conn, [loud, silent], resolve_range(conn))
    assert result.silent_rules() == ["silent"]
    assert result.per_rule()["loud"] == len(result.fires) > 0
    text = result.render_text()
    assert "on recorded history" in text and SILENT_NOTE in text and ON_RECORDED_HISTORY in text
    days = result.per_day()
    assert sum(n for _, _, n in days) == len(result.fires)
    data = result.to_json()
    assert data["on_recorded_history"] is True
    assert data["fires"][0]["aggregates"][0]["result"] >= 3
    assert data["silent_rules"] == ["silent"]


def _rule_file(tmp_path: Path, name: str, when: str) -> Path:
    path = tmp_path / f"{name}.yml"
    path.write_text(
        f"name: {name}\non: run_event\nwhen: {json.dumps(when)}\nlevel: notify\n"
        "target: harness\ncooldown: 0s\nmessage: m\n"
    )
    return path


def test_cli_backtest_by_file_and_by_name(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _rule_file(tmp_path, "candidate", RESTART_RULE)
    code = harness(["rules", "backtest", str(path), "--store", str(store_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["rules"][0]["name"] == "candidate"
    assert out["range"]["rows"] == 1260
    assert len(out["fires"]) == 58  # restarts 3..60, each with >= 3 in the last hour
    # The saving is visible: the 58 restarts whose count reaches 3 are read (SQL tests
    # the count), not the 600 tool calls; CEL ran on those. Of the 600 ticks only the
    # first is read: it starts the rule's shadow period, and with nothing enforced no
    # hold is ever open for a later tick to release.
    assert (out["rows_scanned"], out["rows_evaluated"]) == (59, 58)
    code = harness(
        ["rules", "backtest", "restart_same_error", "--store", str(store_path), "--since", "2h"]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "restart_same_error" in text and "on recorded history" in text


def test_cli_backtest_reports_bad_rules_with_location(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: run_event\nwhen: event.nope == 1\nlevel: notify\ntarget: harness\n"
    )
    code = harness(["rules", "backtest", str(bad), "--store", str(store_path)])
    err = capsys.readouterr().err
    # A rule file that was read but does not load is an invalid rule file: exit 1 (issue 13,
    # item 14). An unknown name or an unusable store stays exit 2, below.
    assert code == 1
    assert f"{bad}:3:" in err
    code = harness(["rules", "backtest", "no_such_rule", "--store", str(store_path)])
    err = capsys.readouterr().err
    assert code == 2 and "no rule named 'no_such_rule'" in err and "restart_same_error" in err
    code = harness(
        ["rules", "backtest", "restart_same_error", "--store", str(tmp_path / "none.db")]
    )
    assert code == 2
    assert not (tmp_path / "none.db").exists()  # a backtest never creates a store


def test_backtest_writes_nothing(store_path: Path) -> None:
    conn = connect(store_path)
    before = conn.execute("SELECT count(*) FROM rule_fires").fetchone()[0]
    run_backtest(conn, [make_rule("r", RESTART_RULE)], resolve_range(conn))
    ro = sqlite3.connect(store_path)
    assert ro.execute("SELECT count(*) FROM rule_fires").fetchone()[0] == before == 0
    assert ro.execute("SELECT count(*) FROM rule_cursor").fetchone()[0] == 0


def test_text_shows_the_lifecycle_outcome_when_it_ran(store_path: Path) -> None:
    conn = connect(store_path)
    result = run_backtest(conn, [make_rule("r", RESTART_RULE)], resolve_range(conn))
    assert "under today's config" not in result.render_text()
    result.extra["lifecycle"] = {
        "by_status": {"fired": 2, "suppressed": 5},
        "acting_levels": {"notify": 2},
        "shadow_until": {"r": "2026-01-04T00:00:00Z"},
        "hold_spans": [
            {"rule": "r", "harness": "h1", "start": "2026-01-01T00:20:00Z", "end": None}
        ],
    }
    text = result.render_text()
    assert "status: fired 2, suppressed 5" in text
    assert "r: in shadow until 2026-01-04T00:00:00Z" in text
    assert "hold r on h1: 2026-01-01T00:20:00Z -> still held at the end of the range" in text
    assert result.to_json()["lifecycle"]["by_status"] == {"fired": 2, "suppressed": 5}


def test_cli_a_file_that_is_not_a_store_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all\n" * 100)
    assert harness(["rules", "backtest", "restart_same_error", "--store", str(junk)]) == 2
    assert harness(["rules", "explain", "1", "--store", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("Bad store") == 2 and "Traceback" not in err
