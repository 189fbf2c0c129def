"""The prefilter: which conditions it proves from the checked AST, and which it refuses."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.rules.evaluation.candidates import CandidatePlan, candidate_plan, minimal_terms
from engine.rules.evaluation.window import ROW_SELECT
from engine.rules.language.celast import decode_checked
from engine.rules.language.celenv import default_environment
from engine.rules.language.prefilter import Prefilter, Term, derive, for_rule
from engine.store.db import connect
from tests.rules.test_evaluator import T0, insert, make_rule, row

COUNT = 'count({"harness": event.harness}, duration("1h")) >= 2'


def prefilter(when: str, kind: str = "run_event") -> Prefilter:
    expr, errors = default_environment().compile(kind, when)
    assert expr is not None, errors
    ast = decode_checked(expr.serialize())
    return derive(ast.root, ast.references, kind)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ('event.type == "restart"', {"type": {"restart"}}),
        ('"restart" == event.type', {"type": {"restart"}}),
        (f'event.type == "restart" && {COUNT}', {"type": {"restart"}}),
        (f'{COUNT} && event.type == "restart"', {"type": {"restart"}}),
        ('event.type == "a" || event.type == "b"', {"type": {"a", "b"}}),
        ('event.type in ["a", "b"]', {"type": {"a", "b"}}),
        (
            '(event.type == "a" || event.type in ["b", "c"]) && has(event.path)',
            {"type": {"a", "b", "c"}},
        ),
        (
            'event.type == "tool_call" && event.outcome == "error" && event.tool != "x"',
            {"type": {"tool_call"}, "outcome": {"error"}},
        ),
        ('event.type in ["a", "b"] && event.type == "a"', {"type": {"a"}}),
        ('event.type == "a" && event.type == "b"', {"type": set()}),
        ('event.harness == ""', {"harness": {""}}),
    ],
)
def test_conjuncts_of_literal_equalities_become_conditions(
    when: str, expected: dict[str, set[str]]
) -> None:
    got = prefilter(when)
    assert got.kind == "run_event"
    assert {k: set(v) for k, v in got.conditions} == expected


@pytest.mark.parametrize(
    "when",
    [
        '!(event.type == "a")',
        'event.type != "a"',
        '(event.type == "a") == true',
        'event.type == "a" ? true : false',
        'event.type == "a" ? true : event.type == "b"',
        'event.type.startsWith("rest")',
        "event.type == event.harness",
        'event.type in ["a", event.harness]',
        "event.type in [event.harness]",
        "has(event.path)",
        'event.type == "a" || event.harness == "b"',
        f'event.type == "a" || {COUNT}',
        "event.n == 3",
        '[event.type].exists(t, t == "a")',
        '[1].all(x, event.type == "a")',
        'event.type + "" == "a"',
        'string(event.type) == "a"',
        "true",
    ],
)
def test_anything_else_is_refused(when: str) -> None:
    """No condition is proven: the rule is evaluated on every row of its kind."""
    assert prefilter(when).conditions == ()


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ('event.tool != "bash"', {"tool": {"bash"}}),
        ('"bash" != event.tool && event.tool != "grep"', {"tool": {"bash", "grep"}}),
        ('event.outcome != ""', {"outcome": {""}}),
    ],
)
def test_inequalities_with_a_literal_become_exclusions(
    when: str, expected: dict[str, set[str]]
) -> None:
    got = prefilter(when)
    assert {k: set(v) for k, v in got.exclusions} == expected
    assert got.conditions == ()  # not a condition: the IN lists stay as they were


def test_an_exclusion_reads_absent_as_empty_in_sql_as_cel_does(tmp_path: Path) -> None:
    conn = connect(tmp_path / "x.db")
    insert(conn, [row(T0, "tool_call", outcome="ok"), row(T0 + 1, "tool_call"),
                  row(T0 + 2, "tool_call", outcome="error")])  # fmt: skip

    def admitted(when: str) -> list[int]:
        clause, values = prefilter(when).term().sql()
        sql = f"SELECT seq FROM rule_journal WHERE {clause} ORDER BY seq"
        return [r[0] for r in conn.execute(sql, values)]

    assert admitted('event.outcome != "ok"') == [2, 3]  # absent reads "", which is not "ok"
    assert admitted('event.outcome != ""') == [1, 3]


def test_refused_conjuncts_leave_the_proven_ones() -> None:
    got = prefilter('!(event.harness == "h") && event.type == "restart" && event.n > 1')
    assert got.conditions == (("type", frozenset({"restart"})),)


def test_a_tick_rule_keeps_its_kind() -> None:
    got = prefilter(
        'event.type == "tick" && count({"type": "restart"}, duration("1h")) > 1', "tick"
    )
    assert got.term().conditions == (("kind", frozenset({"tick"})), ("type", frozenset({"tick"})))


def test_a_kind_test_in_the_rule_narrows_its_kind() -> None:
    assert prefilter('event.kind == "run_event"').term().conditions == (
        ("kind", frozenset({"run_event"})),
    )
    assert prefilter('event.kind == "tick"').term().conditions == (("kind", frozenset()),)


def test_the_loader_attaches_the_prefilter_and_for_rule_derives_a_missing_one() -> None:
    rule = make_rule("r", 'event.type in ["restart", "loop_stopped"] && has(event.run)')
    assert isinstance(rule.prefilter, Prefilter)
    assert for_rule(rule).get("type") == {"restart", "loop_stopped"}
    rule.prefilter = None
    assert for_rule(rule).get("type") == {"restart", "loop_stopped"}


# -- candidate terms ----------------------------------------------------------------------


def term(**conds: set[str]) -> Term:
    return Term(tuple(sorted((k, frozenset(v)) for k, v in conds.items())))


def test_minimal_terms_drop_impossible_and_admitted_terms() -> None:
    wide = term(type={"a", "b"})
    narrow = term(kind={"run_event"}, type={"a"})
    other = term(kind={"tick"})
    dead = term(type=set())
    assert minimal_terms([narrow, wide, other, dead, wide]) == (wide, other)


def test_a_window_index_that_needs_every_row_reads_everything() -> None:
    rules = [make_rule("r", f'event.type == "restart" && {COUNT}')]
    assert candidate_plan(rules, [()], frozenset()).everything
    assert candidate_plan(rules, None, frozenset()).everything
    assert candidate_plan(rules, [], None).everything
    plan = candidate_plan(rules, [(("type", frozenset({"x"})),)], frozenset({"tick"}))
    assert set(plan.terms or ()) == {
        term(kind={"run_event"}, type={"restart"}),
        term(type={"x"}),
        term(kind={"tick"}),
    }


def test_candidate_rows_come_once_each_in_seq_order_with_null_as_empty(tmp_path: Path) -> None:
    conn = connect(tmp_path / "c.db")
    rows = []
    for i in range(40):
        rows.append(row(T0 + i, "restart" if i % 3 == 0 else "tool_call", harness=f"h{i % 2}"))
        rows.append(row(T0 + i, "tick"))
    insert(conn, rows)
    conn.execute("UPDATE rule_journal SET harness = NULL WHERE seq % 4 = 0")
    plan = CandidatePlan(
        (term(kind={"run_event"}, type={"restart"}), term(type={"tick"}), term(harness={""}))
    )
    bound = ("seq BETWEEN ? AND ?", (5, 70))
    got = [r[0] for r in plan.rows(conn, ROW_SELECT, *bound)]
    want = [
        seq
        for seq, kind, type_, harness in conn.execute(
            "SELECT seq, kind, type, harness FROM rule_journal WHERE seq BETWEEN 5 AND 70"
        )
        if (kind, type_) == ("run_event", "restart") or type_ == "tick" or not harness
    ]
    assert got == want == sorted(set(got))
    assert plan.count(conn, *bound) == len(want)


def test_the_index_serves_kind_and_type_lookups(tmp_path: Path) -> None:
    conn = connect(tmp_path / "i.db")
    plan = conn.execute(
        "EXPLAIN QUERY PLAN " + ROW_SELECT + " WHERE seq BETWEEN 1 AND 9 AND kind IN ('tick')"
        " ORDER BY seq"
    ).fetchall()
    assert any("rule_journal_kind_type" in str(step) for step in plan), plan
    assert isinstance(conn, sqlite3.Connection)
