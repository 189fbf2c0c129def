"""Tallies: which shapes they answer, that they answer like the window index, what they leave out.

Fire-for-fire equivalence of replays that tally is also the property test's
job (test_prefilter_properties runs ``replay="tally"``); these pin the
mechanics: the planner tallies a shape only when every call of it is a gate on
the evaluated row's own values, a tally's answer at each row of its filter is
the window index's, calls it does not know go to SQL, a row a gate cannot
decide (a value that is not a string) still reaches the evaluator, and the
tally's tables are gone when the replay ends.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.config import HarnessConfig
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.host_replay import ReplayHost
from engine.rules.evaluation.replay import plan_replay
from engine.rules.evaluation.tallies import Tally, self_gated
from engine.rules.evaluation.window import ROW_SELECT, Shape, WindowIndex, group_filters, plan_rule
from engine.rules.language.model import CompiledRule
from engine.rules.language.prefilter import for_rule
from engine.store.db import connect
from tests.rules.test_evaluator import MIN, T0, insert, make_rule, row
from tests.rules.test_prefilter_properties import full_keys

EDITED = 'event.type == "file_edited"'
BY_PATH = 'count({"path": event.path, "type": "file_edited"}, duration("10m")) >= 3'
HARNESSES = 'distinct("harness", {"path": event.path, "type": "file_edited"}, duration("10m")) >= 2'
COUNT_KEY = (("path", "type"), None, 600_000)
DISTINCT_KEY = (("path", "type"), "harness", 600_000)


def edited(name: str, when: str, level: str = "annotate") -> CompiledRule:
    return make_rule(name, when, on="graph_event", target="path", level=level, cooldown="0s")


def edit_journal(path: Path, seed: int = 7, n: int = 600) -> Path:
    """File edits on a few paths by a few harnesses (some absent values), churn and ticks."""
    rng = random.Random(seed)
    conn = connect(path)
    rows = []
    at = T0
    for _ in range(n):
        at += rng.choice((0, 5_000, 30_000, 120_000))
        if rng.random() < 0.1:
            rows.append(row(at, "tick"))
            continue
        typ = rng.choice(("file_edited", "file_edited", "file_edited", "churn"))
        rows.append(
            row(
                at,
                typ,
                kind="graph_event",
                harness=rng.choice(("h1", "h2", "h3", "")),
                path=rng.choice(("a.py", "b.py", "", None)),
            )
        )
    insert(conn, rows)
    conn.close()
    return path


def _self_gated(*rules: CompiledRule) -> set[tuple[tuple[str, ...], str | None, int]]:
    groups = group_filters(s for cr in rules for s in plan_rule(cr.rule).shapes)
    return set(self_gated(rules, groups))


def _temp_tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_temp_master WHERE type='table'")]


def test_self_gates_are_swept_and_other_calls_are_not() -> None:
    assert _self_gated(edited("a", f"{EDITED} && {BY_PATH} && {HARNESSES}")) == {
        COUNT_KEY,
        DISTINCT_KEY,
    }
    refused = [
        # the churn row asks about file_edited rows: not a row of the filter
        edited("b", f'event.type == "churn" && {BY_PATH}'),
        # a call that is not a gate (inside ||), and a gate with no floor
        edited("c", f'{EDITED} && ({BY_PATH} || event.harness == "h1")'),
        edited(
            "d",
            f'{EDITED} && count({{"path": event.path, "type": "file_edited"}},'
            ' duration("10m")) < 3',
        ),
        # the selector takes its value from another column
        edited(
            "e",
            f'{EDITED} && count({{"path": event.other_harness, "type": "file_edited"}},'
            ' duration("10m")) >= 3',
        ),
        # no kind or type in the filter: no index finds its rows
        make_rule(
            "f",
            'event.outcome == "error" && count({"harness": event.harness,'
            ' "outcome": "error"}, duration("10m")) >= 3',
        ),
    ]
    for cr in refused:
        assert _self_gated(cr) == set(), cr.rule.when
    # One rule that cannot be tallied keeps the shape from every rule.
    assert _self_gated(edited("a", f"{EDITED} && {BY_PATH}"), refused[1]) == set()


def test_a_swept_replay_reads_only_the_rows_whose_gates_pass(tmp_path: Path) -> None:
    conn = connect(edit_journal(tmp_path / "s.db"), readonly=True)
    rules = [edited("by_path", f"{EDITED} && {BY_PATH}"),
             edited("harnesses", f"{EDITED} && {HARNESSES}")]  # fmt: skip
    rng = resolve_range(conn)
    plan = plan_replay(conn, rules, (rng.first_seq, rng.first_at), rng.last_seq, rng.rows,
                       rng.last_at - rng.first_at + 1, "tally")  # fmt: skip
    assert {k for s, *_ in plan.tallies for k in s.keys} == {COUNT_KEY, DISTINCT_KEY}
    assert plan.gates and all("tally_" in c[0] for cs in plan.gates.values() for c in cs)
    plain = run_backtest(conn, rules, rng, prefilter=False)
    for start in (None, rng.first_seq + rng.rows // 2):  # the whole journal, and warm
        seq_range = rng if start is None else resolve_range(conn, from_seq=start)
        tallied = run_backtest(conn, rules, seq_range, replay="tally")
        reference = run_backtest(conn, rules, seq_range, prefilter=False)
        assert full_keys(tallied.fires) == full_keys(reference.fires)
        assert tallied.rows_evaluated == reference.rows_evaluated
        assert _temp_tables(conn) == []
    # Every row read is a row where a rule's gate passed (each such row fires: no cooldown).
    tallied = run_backtest(conn, rules, rng, replay="tally")
    assert tallied.rows_scanned == len({f.seq for f in tallied.fires}) < plain.rows_scanned
    assert len(tallied.fires) > 10


def test_a_tally_answers_like_the_window_index_at_every_row_of_its_filter(
    tmp_path: Path,
) -> None:
    conn = connect(edit_journal(tmp_path / "w.db", seed=3, n=900), readonly=True)
    rules = [edited("r", f"{EDITED} && {BY_PATH} && {HARNESSES}")]
    gates = {"r": for_rule(rules[0]).gates}
    rows = conn.execute(ROW_SELECT + " ORDER BY seq").fetchall()
    first = rows[len(rows) // 3][0]
    first_at = rows[len(rows) // 3][1]
    tally = Tally((("type", frozenset({"file_edited"})),), [COUNT_KEY, DISTINCT_KEY], gates)
    tally.run(conn, first_at - 600_000, first, rows[-1][0])
    index = WindowIndex([Shape("count", ("path", "type"), 600_000),
                         Shape("distinct", ("path", "type"), 600_000, "harness")])  # fmt: skip
    checked = 0
    for r in rows:
        index.feed(r)
        if r[0] < first:
            continue
        sel = {"path": r[10], "type": "file_edited"}
        count = tally.answer(COUNT_KEY, r, sel, r[1])
        distinct = tally.answer(DISTINCT_KEY, r, sel, r[1])
        if r[3] != "file_edited":
            assert count is None and distinct is None  # not a row of the filter
            continue
        assert count == index.count(sel, 600_000)
        assert distinct == index.distinct("harness", sel, 600_000)
        # Another row's values, or another time: not the tally's to answer.
        assert tally.answer(COUNT_KEY, r, {**sel, "path": r[10] + "x"}, r[1]) is None
        assert tally.answer(COUNT_KEY, r, sel, r[1] + 1) is None
        checked += 1
    assert checked > 300
    passed = {s for (s,) in conn.execute(f"SELECT seq FROM {tally.tables['r']}")}
    want = set()
    for r in rows:
        if r[0] >= first and r[3] == "file_edited":
            count, harnesses = brute_force(rows, r)
            if count >= 3 and harnesses >= 2:
                want.add(r[0])
    assert passed == want
    tally.drop(conn)
    assert _temp_tables(conn) == []


def brute_force(rows: list[tuple[Any, ...]], r: tuple[Any, ...]) -> tuple[int, int]:
    """(count, distinct harnesses) of r's path among file edits in its 10 minutes, brute force."""
    window = [x for x in rows if x[0] <= r[0] and x[1] > r[1] - 600_000
              and x[3] == "file_edited" and x[10] == r[10]]  # fmt: skip
    return len(window), len({x[5] for x in window if x[5]})


def test_calls_a_tally_does_not_know_are_asked_in_sql(tmp_path: Path) -> None:
    conn = connect(tmp_path / "h.db")
    insert(conn, [row(T0 + i * MIN, "file_edited", kind="graph_event", path="a.py")
                  for i in range(4)] + [row(T0 + 5 * MIN, "tick")])  # fmt: skip
    rules = [edited("r", f"{EDITED} && {BY_PATH}")]
    tally = Tally(
        (("type", frozenset({"file_edited"})),), [COUNT_KEY], {"r": for_rule(rules[0]).gates}
    )
    tally.run(conn, 0, 1, 5)
    filters = {COUNT_KEY: (("type", frozenset({"file_edited"})),)}
    shape = Shape("count", ("path", "type"), 600_000, literals=(("type", "file_edited"),))
    host = ReplayHost([shape], {COUNT_KEY: "rule_journal"}, filters, conn, {COUNT_KEY: tally})
    rows = conn.execute(ROW_SELECT + " ORDER BY seq").fetchall()
    for r in rows[:3]:
        host.feed(r)
    assert host.count({"path": "a.py", "type": "file_edited"}, 600_000) == 3  # the tally's
    assert host.count({"path": "b.py", "type": "file_edited"}, 600_000) == 0  # SQL's
    host.feed(rows[4])  # a tick: a hold re-evaluated there asks with an older row's values
    assert host.count({"path": "a.py", "type": "file_edited"}, 600_000) == 4


def test_a_value_no_gate_can_decide_still_reaches_the_evaluator(tmp_path: Path) -> None:
    conn = connect(edit_journal(tmp_path / "b.db", n=200))
    conn.execute("UPDATE rule_journal SET path = x'00ff' WHERE seq = (SELECT min(seq) FROM"
                 " rule_journal WHERE type = 'file_edited')")  # fmt: skip
    rules = [edited("r", f"{EDITED} && {BY_PATH}")]
    rng = resolve_range(conn)
    tallied = run_backtest(conn, rules, rng, replay="tally")
    plain = run_backtest(conn, rules, rng, prefilter=False)
    assert full_keys(tallied.fires) == full_keys(plain.fires)
    assert tallied.rule_errors == plain.rule_errors != ()


@pytest.mark.parametrize("level", ["hold", "notify"])
def test_the_lifecycle_sees_the_same_fires_and_holds(tmp_path: Path, level: str) -> None:
    conn = connect(edit_journal(tmp_path / "l.db", seed=11, n=800), readonly=True)
    rules = [make_rule("r", f'event.type == "file_edited" && {BY_PATH} && {HARNESSES}',
                       on="graph_event", level=level, cooldown="5m")]  # fmt: skip
    authority = Authority.from_config(HarnessConfig())
    rng = resolve_range(conn)
    tallied = backtest_with_lifecycle(conn, rules, rng, authority, replay="tally")
    plain = backtest_with_lifecycle(conn, rules, rng, authority, prefilter=False)
    assert full_keys(tallied.fires) == full_keys(plain.fires) and tallied.fires
    assert tallied.extra == plain.extra
