"""Parity stamp: a backtest compared with the live fires stored over the same rows."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engine.cli.harness import main as harness
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.live_evaluator import LiveEvaluator
from engine.rules.evaluation.parity import compare_live, fires_digest, stamp
from engine.store.db import connect
from tests.rules.test_backtest import _rule_file, restart_journal
from tests.rules.test_evaluator import RESTART_RULE, make_rule


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return restart_journal(tmp_path / "parity.db")


def _live_then_backtest(path: Path, **kw: object):  # type: ignore[no-untyped-def]
    conn = connect(path)
    rule = make_rule("r", RESTART_RULE, cooldown="0s")
    live = LiveEvaluator(conn, [rule]).run_until_idle()
    assert live
    return conn, rule, run_backtest(conn, [rule], resolve_range(conn, **kw))  # type: ignore[arg-type]


def test_stamp_carries_range_hashes_and_an_order_free_digest(store_path: Path) -> None:
    _conn, rule, result = _live_then_backtest(store_path)
    st = stamp(result)
    assert (st.first_seq, st.last_seq) == (result.range.first_seq, result.range.last_seq)
    assert st.rules == ((rule.rule.name, rule.rule.hash),)
    assert st.fires == len(result.fires) and len(st.digest) == 64
    assert fires_digest(reversed(result.fires)) == st.digest
    assert fires_digest(result.fires[1:]) != st.digest


def test_live_equals_backtest_over_the_same_rows(store_path: Path) -> None:
    _conn, _rule, result = _live_then_backtest(store_path)
    conn = connect(store_path)
    parity = compare_live(conn, result)
    assert parity.equal and not parity.differences
    assert parity.live_fires == len(result.fires) == parity.backtest_fires
    assert parity.summary().startswith(f"live = backtest ({len(result.fires)} fires, digest ")
    assert parity.live_digest == parity.backtest_digest == stamp(result).digest


def test_a_missing_live_fire_is_listed_unless_its_row_was_a_store_error(
    store_path: Path,
) -> None:
    _conn, _rule, result = _live_then_backtest(store_path)
    conn = connect(store_path)
    seq = result.fires[3].seq
    conn.execute("DELETE FROM rule_fires WHERE seq = ?", (seq,))
    parity = compare_live(conn, result)
    assert not parity.equal and parity.difference_count == 1
    (diff,) = parity.differences
    assert (diff.kind, diff.seq, diff.store_error) == ("only_backtest", seq, False)
    assert "live ≠ backtest: 1 difference" in parity.summary()
    assert f"backtest only: seq {seq}" in "\n".join(parity.lines())
    conn.execute(
        "INSERT INTO rule_store_errors (seq, rule, error, at) VALUES (?, 'r', 'disk', 0)", (seq,)
    )
    allowed = compare_live(conn, result)
    assert allowed.equal and allowed.store_errors == 1
    assert "store_error" in allowed.summary()
    assert allowed.to_json()["differences"][0]["allowed"] == "store_error"


def test_an_extra_live_fire_and_a_changed_result_are_differences(store_path: Path) -> None:
    _conn, _rule, result = _live_then_backtest(store_path)
    conn = connect(store_path)
    seq = result.fires[0].seq
    conn.execute("UPDATE rule_fires SET calls = replace(calls, '\"result\": 3', '\"result\": 9')")
    conn.execute("UPDATE rule_fires SET target = 'h9' WHERE seq = ?", (seq,))
    parity = compare_live(conn, result)
    kinds = {d.kind for d in parity.differences}
    assert kinds == {"only_backtest", "only_live"}
    assert not parity.equal


def test_rows_past_the_live_cursor_and_cancelled_runs_are_not_compared(
    store_path: Path,
) -> None:
    conn = connect(store_path)
    rule = make_rule("r", RESTART_RULE, cooldown="0s")
    never = compare_live(conn, run_backtest(conn, [rule], resolve_range(conn)))
    assert never.compared is None and "not reached" in never.summary()
    LiveEvaluator(conn, [rule]).run_until_idle()
    cancel = threading.Event()
    cancel.set()
    cut = run_backtest(conn, [rule], resolve_range(conn), cancel=cancel)
    assert compare_live(conn, cut).compared is None
    conn.execute("UPDATE rule_cursor SET seq = 700 WHERE name = 'live'")
    conn.execute("DELETE FROM rule_fires WHERE seq > 700")
    part = compare_live(conn, run_backtest(conn, [rule], resolve_range(conn)))
    assert part.equal and part.compared == (1, 700)
    assert any("live cursor" in n for n in part.notes)


def test_cli_backtest_json_carries_the_parity_stamp(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _rule_file(tmp_path, "candidate", RESTART_RULE)
    code = harness(["rules", "backtest", str(path), "--store", str(store_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    parity = out["parity"]
    assert parity["stamp"]["range"]["last_seq"] == out["range"]["last_seq"]
    assert parity["stamp"]["rules"] == out["rules"]
    assert parity["stamp"]["fires"] == len(out["fires"])
    assert parity["compared"] is None  # nothing evaluated this store live
    code = harness(["rules", "backtest", str(path), "--store", str(store_path)])
    assert "parity: not compared" in capsys.readouterr().out
