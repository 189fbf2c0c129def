"""The replay planner: what it chooses, the host it builds, the tables it leaves behind.

Fire-for-fire equivalence of every choice is the property test's job
(test_prefilter_properties); these pin the mechanics: a shape answered by SQL
is refused outside its literal filter as the window index refuses it, answers
handed to the host are used, shape tables live in the temp schema of a
read-only connection and are gone when the replay ends, and the one-pass read
returns the rows the index reads return.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.candidates import CandidatePlan
from engine.rules.evaluation.host_replay import ReplayHost
from engine.rules.evaluation.replay import plan_replay
from engine.rules.evaluation.shape_tables import shape_table
from engine.rules.evaluation.window import ROW_SELECT, SelectorNotIndexed, Shape
from engine.rules.language.prefilter import Term
from engine.store.db import connect
from tests.rules.test_backtest import restart_journal
from tests.rules.test_evaluator import CAUSE, T0, insert, make_rule, row
from tests.rules.test_prefilter_properties import build_journal

PER_HARNESS = 'event.type == "restart" && count({"harness": event.harness}, duration("1h")) >= 3'


def _temp_tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_temp_master WHERE type='table'")]


def test_an_open_shape_is_answered_by_sql_and_its_gate_read_in_the_query(tmp_path: Path) -> None:
    path = restart_journal(tmp_path / "o.db")
    conn = connect(path, readonly=True)
    rule = make_rule("r", PER_HARNESS, cooldown="0s")
    rng = resolve_range(conn)
    plan = plan_replay(conn, [rule], (rng.first_seq, rng.first_at), rng.last_seq, rng.rows,
                       rng.last_at - rng.first_at + 1)  # fmt: skip
    assert plan.sql_shapes == {(("harness",), None, 3_600_000): "rule_journal"}
    assert "r" in plan.gates  # the count is tested in SQL before rows are read
    fast = run_backtest(conn, [rule], rng)
    plain = run_backtest(conn, [rule], rng, prefilter=False)
    assert [f.key() for f in fast.fires] == [f.key() for f in plain.fires]
    # Only restarts whose harness had 3 rows in the hour are read, not the 1,260 rows.
    assert fast.rows_scanned == len(fast.fires) < plain.rows_scanned == 1260


def test_shape_tables_live_in_temp_of_a_read_only_connection_and_are_dropped(
    tmp_path: Path,
) -> None:
    path = restart_journal(tmp_path / "t.db")
    conn = connect(path, readonly=True)
    rule = make_rule("r", 'event.type == "restart" && count({"cause_digest": event.cause_digest,'
                     ' "type": "restart"}, duration("1h")) >= 3', cooldown="0s")  # fmt: skip
    rng = resolve_range(conn)
    table = run_backtest(conn, [rule], rng, replay="table")
    assert _temp_tables(conn) == []
    plain = run_backtest(conn, [rule], rng, prefilter=False)
    assert [f.key() for f in table.fires] == [f.key() for f in plain.fires]
    cancel = threading.Event()
    cancel.set()
    run_backtest(conn, [rule], rng, replay="table", cancel=cancel)
    assert _temp_tables(conn) == []


def test_a_failing_replay_still_drops_its_tables(tmp_path: Path) -> None:
    path = restart_journal(tmp_path / "f.db")
    conn = connect(path, readonly=True)
    rule = make_rule("r", 'event.type == "restart" && count({"cause_digest": event.cause_digest,'
                     ' "type": "restart"}, duration("1h")) >= 3')  # fmt: skip

    def boom(_p: object) -> None:
        raise RuntimeError("progress consumer failed")

    with pytest.raises(RuntimeError):
        run_backtest(conn, [rule], resolve_range(conn), replay="table", progress=boom, batch=5)
    assert _temp_tables(conn) == []


def test_shape_tables_hold_the_filtered_rows_with_absent_values_as_empty(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    insert(conn, [row(T0 + i, "restart" if i % 2 else "tool_call", harness=f"h{i % 3}",
                      cause_digest=CAUSE if i % 4 else None) for i in range(12)])  # fmt: skip
    table = shape_table(("cause_digest", "type"), "harness", (("type", frozenset({"restart"})),))
    other = shape_table(("cause_digest", "type"), "harness", (("type", frozenset({"restart"})),))
    assert table.name != other.name and table.name.startswith("temp.")
    table.create(conn, T0 + 2, 10, [("cause_digest", "type", "at", "harness")])
    got = conn.execute(f"SELECT seq, cause_digest, type, harness FROM {table.name} ORDER BY seq")
    want = [
        (s, c or "", t, h or "")
        for s, c, t, h in conn.execute(
            "SELECT seq, cause_digest, type, harness FROM rule_journal"
            " WHERE type = 'restart' AND at > ? AND seq <= 10 ORDER BY seq",
            (T0 + 2,),
        )
    ]
    assert list(got) == want and want
    table.drop(conn)
    assert _temp_tables(conn) == []
    with pytest.raises(ValueError):
        shape_table(("harness; DROP TABLE x",), None, ())


def test_a_sql_shape_refuses_values_outside_its_literals_like_the_window_index(
    tmp_path: Path,
) -> None:
    conn = connect(tmp_path / "r.db")
    insert(conn, [row(T0 + i, "restart") for i in range(3)])
    key = (("harness", "type"), None, 60_000)
    host = ReplayHost(
        [Shape("count", ("harness", "type"), 60_000, literals=(("type", "restart"),))],
        {key: "rule_journal"},
        {key: (("type", frozenset({"restart"})),)},
        conn,
    )
    for r in conn.execute(ROW_SELECT + " ORDER BY seq"):
        host.feed(r)
    assert host.count({"harness": "h1", "type": "restart"}, 60_000) == 3
    with pytest.raises(SelectorNotIndexed):
        host.count({"harness": "h1", "type": "tool_call"}, 60_000)


def test_answers_handed_over_are_used_for_that_row_only(tmp_path: Path) -> None:
    conn = connect(tmp_path / "p.db")
    insert(conn, [row(T0 + i, "restart") for i in range(3)])
    key = (("harness",), None, 60_000)
    host = ReplayHost([Shape("count", ("harness",), 60_000)], {key: "rule_journal"}, {}, conn)
    rows = conn.execute(ROW_SELECT + " ORDER BY seq").fetchall()
    call = ("count", None, (("harness", "h1"),), 60_000)
    host.prime(rows[1][0], call, 99)
    host.feed(rows[1])
    assert host.count({"harness": "h1"}, 60_000) == 99
    host.feed(rows[2])
    assert host.count({"harness": "h1"}, 60_000) == 3  # the next row asks SQL again


def _term(**conds: set[str]) -> Term:
    return Term(tuple(sorted((k, frozenset(v)) for k, v in conds.items())))


TERMS = (
    _term(kind={"run_event"}, type={"restart"}),
    _term(kind={"run_event"}, type={"tool_call"}, outcome={"error"}),
    _term(type={"tick"}),
    _term(type={"verify_failed", "loop_stopped"}),
    _term(outcome={"ok"}),
    _term(harness={""}),
    _term(kind={"graph_event"}),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(st.integers(0, len(TERMS) - 1), min_size=1, max_size=5, unique=True),
    order=st.permutations(["tool_call", "restart", "tick", "verify_failed"]),
    seed=st.integers(0, 1000),
)
def test_one_pass_reads_the_rows_the_index_reads_read(
    tmp_path_factory: pytest.TempPathFactory, picks: list[int], order: list[str], seed: int
) -> None:
    path = tmp_path_factory.mktemp("scan") / "j.db"
    build_journal(path, seed, 200)
    conn = connect(path)
    terms = tuple(TERMS[i] for i in picks)
    bound = ("seq BETWEEN ? AND ?", (3, 180))
    by_index = [r[0] for r in CandidatePlan(terms).rows(conn, ROW_SELECT, *bound)]
    in_one = CandidatePlan(terms, scan=True, order=tuple(order))
    by_scan = [r[0] for r in in_one.rows(conn, ROW_SELECT, *bound)]
    assert by_scan == by_index == sorted(set(by_index))
    assert in_one.count(conn, *bound) == len(by_scan)
    conn.close()
