"""Aggregate gates: which conjuncts are gates, and that every use of them changes no result.

A gate lets the evaluator skip CEL (or decide a rule without it), lets SQL turn
rows away before they are read, and lets the candidate query hand answers to
the host. Each is checked against the thing it stands for: the evaluator with
gates against the one without; the SQL floor test against the window index's
answer at every row (exactly, both ways, so a test that admitted too much is
caught as well as one that dropped a fire); the SQL answer against the window
index's answer; on the journal and on a shape table.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules.evaluation.aggsql import gate_predicate, gate_value, journal_indexes
from engine.rules.evaluation.evaluator import RowEvaluator, fast_host_for
from engine.rules.evaluation.shape_tables import shape_table
from engine.rules.evaluation.window import ROW_SELECT, Shape, WindowIndex
from engine.rules.language.celast import decode_checked
from engine.rules.language.celenv import default_environment
from engine.rules.language.gates import Gate, derive_gates
from engine.rules.language.model import SATURATION
from engine.rules.language.prefilter import for_rule
from engine.store.db import connect
from tests.rules.test_evaluator import make_rule
from tests.rules.test_prefilter_properties import build_journal

COUNT_H = 'count({"harness": event.harness}, duration("5m"))'


def gates(when: str, kind: str = "run_event") -> tuple[Gate, ...]:
    expr, errors = default_environment().compile(kind, when)
    assert expr is not None, errors
    ast = decode_checked(expr.serialize())
    return derive_gates(ast.root, ast.references, kind)


def test_comparisons_either_way_round_are_gates_with_a_floor() -> None:
    (g,) = gates(f'event.type == "restart" && {COUNT_H} >= 3')
    assert (g.fn, g.op, g.n, g.floor, g.window_ms) == ("count", ">=", 3, 3, 300_000)
    assert g.selector == (("harness", ("row", "harness")),)
    (g,) = gates(f"3 < {COUNT_H}")  # flipped: count > 3
    assert (g.op, g.n, g.floor) == (">", 3, 4)
    (g,) = gates(f"{COUNT_H} == 2")
    assert g.floor == 2 and g.passes(2) and not g.passes(3)
    for text in (f"{COUNT_H} < 3", f"{COUNT_H} != 0", f"{COUNT_H} >= 0"):
        (g,) = gates(text)
        assert g.floor is None  # passing does not need a least count


def test_exists_and_its_negation_are_gates() -> None:
    sel = '{"harness": event.harness, "type": "verify_failed"}'
    (g,) = gates(f'exists({sel}, duration("2h"))')
    assert (g.fn, g.op, g.floor) == ("exists", "exists", 1)
    assert g.selector == (("harness", ("row", "harness")), ("type", ("lit", "verify_failed")))
    (g,) = gates(f'!exists({sel}, duration("2h"))')
    assert (g.op, g.floor) == ("absent", None)
    assert g.passes(False) and not g.passes(True)


def test_distinct_gates_keep_their_field() -> None:
    (g,) = gates('distinct("tool", {"harness": event.harness}, duration("30m")) >= 3')
    assert (g.fn, g.field, g.floor, g.shape_key) == (
        "distinct",
        "tool",
        3,
        (("harness",), "tool", 1_800_000),
    )


@pytest.mark.parametrize(
    "when",
    [
        f'event.type == "restart" || {COUNT_H} >= 3',  # not a top-level conjunct
        f"!({COUNT_H} >= 3)",
        'count({"harness": event.harness + "x"}, duration("5m")) >= 3',  # computed value
        f'{COUNT_H} >= int("3")',  # not an int literal
        f"{COUNT_H} >= {COUNT_H}",
        f"({COUNT_H} >= 3 ? true : false)",
    ],
)
def test_anything_else_is_no_gate(when: str) -> None:
    assert gates(when) == ()


def test_a_repeated_conjunct_stays_twice_as_cel_would_call_it_twice() -> None:
    assert len(gates(f"{COUNT_H} >= 3 && {COUNT_H} >= 3")) == 2


def test_a_threshold_beyond_saturation_never_passes() -> None:
    (g,) = gates(f"{COUNT_H} > {SATURATION}")
    assert g.never and g.floor == SATURATION + 1


def test_conditions_exclusions_and_gates_make_a_rule_complete() -> None:
    pf = for_rule(make_rule("c0", 'event.type == "restart" && event.outcome != "ok"'))
    assert pf.complete and pf.exclusions == (("outcome", frozenset({"ok"})),)
    assert for_rule(make_rule("c1", f'event.type == "restart" && {COUNT_H} >= 2')).complete
    assert not for_rule(make_rule("c2", 'event.type == "restart" && has(event.outcome)')).complete


# -- every gate use against what it stands for -----------------------------------------------

#: Rules whose gates cover every form: floors, none, negation, distinct, literal "" values,
#: row values that are empty, an empty selector, a flipped comparison, a repeated conjunct.
WHENS = (
    f'event.type == "restart" && {COUNT_H} >= 2',
    'event.type in ["restart", "tool_call"] && 2 < count({"harness": event.harness,'
    ' "type": event.type}, duration("3m"))',
    'distinct("outcome", {"harness": event.harness}, duration("20m")) >= 2',
    '!exists({"harness": event.harness, "outcome": "ok"}, duration("2m"))',
    'exists({"type": event.type, "outcome": ""}, duration("5m")) && event.outcome != "error"',
    'count({}, duration("1m")) >= 3 && count({"outcome": event.outcome}, duration("10m")) < 3',
    f"{COUNT_H} == 2 && {COUNT_H} == 2",
    'event.type == "tool_call" && distinct("harness", {"type": "tool_call"}, duration("1h")) >= 2',
)


_RULES: list[Any] = []


def _compiled() -> list[Any]:
    if not _RULES:
        _RULES.extend(make_rule(f"g{i}", w, cooldown="0s") for i, w in enumerate(WHENS))
    return _RULES


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300))
def test_gates_and_decided_rules_fire_exactly_as_cel_alone(seed: int, n: int) -> None:
    rules = _compiled()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.db"
        build_journal(path, seed, n)
        conn = connect(path)
        rows = conn.execute(ROW_SELECT + " ORDER BY seq").fetchall()
        gated = RowEvaluator(rules, fast_host_for(rules))
        plain = RowEvaluator(rules, fast_host_for(rules), use_gates=False)
        got = [(*f.key(), f.cost) for r in rows for f in gated.process(r)]
        want = [(*f.key(), f.cost) for r in rows for f in plain.process(r)]
        assert got == want
        assert gated.rule_errors == plain.rule_errors
        assert gated.evaluations <= plain.evaluations
        conn.close()


def _all_gates() -> list[Gate]:
    return [g for cr in _compiled() for g in for_rule(cr).gates]


def _window_answer(host: WindowIndex, gate: Gate, row: tuple[Any, ...]) -> int | bool:
    from engine.rules.evaluation.window import COL

    sel = {k: (v if tag == "lit" else row[COL[v]]) for k, (tag, v) in gate.selector}
    if gate.fn == "count":
        return host.count(sel, gate.window_ms)
    if gate.fn == "distinct":
        return host.distinct(gate.field or "", sel, gate.window_ms)
    return host.exists(sel, gate.window_ms)


def _shape_tables(conn: sqlite3.Connection, all_gates: list[Gate]) -> dict[Gate, str]:
    """A shape table per gate (no filter: every row), as a replay would build one."""
    out = {}
    for gate in all_gates:
        keys = gate.keys
        table = shape_table(keys, gate.field, ())
        index = (*keys, "at", *([gate.field] if gate.field else []))
        table.create(conn, -1, 10**12, [index])
        out[gate] = table.name
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 250))
def test_sql_gates_and_answers_agree_with_the_window_index_at_every_row(seed: int, n: int) -> None:
    all_gates = _all_gates()
    shapes = [
        Shape(g.fn, g.keys, g.window_ms, g.field if g.fn == "distinct" else None) for g in all_gates
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        build_journal(path, seed, n)
        conn = connect(path)
        available = journal_indexes(conn)
        tables = _shape_tables(conn, all_gates)
        host = WindowIndex(shapes)
        checked = 0
        for row in conn.execute(ROW_SELECT + " ORDER BY seq").fetchall():
            host.feed(row)
            for gate in all_gates:
                want = _window_answer(host, gate, row)
                for table in (None, tables[gate]):
                    value = gate_value(gate, available, table)
                    if value is not None:
                        got = _at_row(conn, value, row[0])
                        assert got == int(want), (gate, table, row[0])
                        checked += 1
                    pred = gate_predicate(gate, available, table)
                    if pred is not None and gate.floor is not None:
                        admitted = bool(_at_row(conn, pred, row[0]))
                        assert admitted == (min(int(want), SATURATION) >= gate.floor), (
                            gate,
                            table,
                            row[0],
                        )
        assert checked > 0
        conn.close()


def _at_row(conn: sqlite3.Connection, clause: tuple[str, list[Any]], seq: int) -> int:
    sql, params = clause
    row = conn.execute(f"SELECT {sql} FROM rule_journal WHERE seq = ?", (*params, seq)).fetchone()
    return int(row[0])


def test_a_random_journal_has_rows_on_both_sides_of_each_floor() -> None:
    """The agreement test is not vacuous: floors pass on some rows and fail on others."""
    all_gates = [g for g in _all_gates() if g.floor is not None]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.db"
        build_journal(path, 7, 300)
        conn = connect(path)
        available = journal_indexes(conn)
        seen: dict[Gate, set[bool]] = {}
        for (seq,) in conn.execute("SELECT seq FROM rule_journal").fetchall():
            for gate in all_gates:
                pred = gate_predicate(gate, available)
                if pred is not None:
                    seen.setdefault(gate, set()).add(bool(_at_row(conn, pred, seq)))
        assert sum(1 for v in seen.values() if v == {True, False}) >= 3
        conn.close()


def test_the_journal_indexes_are_read_from_the_store(tmp_path: Path) -> None:
    conn = connect(tmp_path / "i.db")
    by_name = {i.name: i for i in journal_indexes(conn)}
    assert by_name["rule_journal_harness_at"].seek == ("harness",)
    assert "args_digest" in by_name["rule_journal_harness_at"].covers
    assert by_name["rule_journal_harness_type"].seek == ("harness", "type")
    assert by_name["rule_journal_type_at"].seek == ("type",)
    assert "rule_journal_kind_type" not in by_name  # no `at`: no window range
