"""The window index against the SQL host, window edges, saturation, memory, and rule planning."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from engine.rules.evaluation import host_sql, window
from engine.rules.evaluation.host_sql import SqlHost
from engine.rules.evaluation.window import (
    ROW_SELECT,
    SelectorNotIndexed,
    Shape,
    WindowIndex,
    plan_rule,
)
from engine.store.db import connect

INSERT = (
    "INSERT INTO rule_journal (seq, at, kind, type, source, harness, project, run, tool,"
    " outcome, path, cause_digest, args_digest, other_harness, fact, n)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def random_rows(n: int, seed: int) -> list[tuple[object, ...]]:
    """A small journal with few distinct values so selectors match often; some NULLs."""
    rng = random.Random(seed)
    at = 1_000_000
    rows = []
    for seq in range(1, n + 1):
        at += rng.choice((0, 0, 1, 5, 30, 200))  # equal `at` values on purpose
        typ = rng.choice(("restart", "restart", "tool_call", "verify_failed"))
        rows.append(
            (
                seq,
                at,
                "run_event",
                typ,
                "observer",
                rng.choice(("h1", "h2", "h3")),
                "p",
                rng.choice(("r1", "r2", "r3", "r4", None)),
                None,
                None,
                None,
                rng.choice(("sha256:a", "sha256:b", None)),
                None,
                None,
                None,
                1,
            )
        )
    return rows


@pytest.fixture
def journal(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(tmp_path / "j.db")
    conn.executemany(INSERT, random_rows(1500, seed=3))
    return conn


SHAPES = [
    Shape("count", ("harness", "type"), 60),
    Shape("count", ("cause_digest", "harness", "type"), 300, literals=(("type", "restart"),)),
    Shape("exists", ("run",), 10),
    Shape("distinct", ("type",), 500, field="run"),
    Shape("distinct", ("cause_digest", "type"), 120, field="harness"),
    Shape("count", (), 40),
]


def _queries(row: tuple[object, ...], rng: random.Random) -> list[tuple[str, object]]:
    harness = rng.choice(("h1", "h2", "h3", "hx"))
    typ = rng.choice(("restart", "tool_call", "verify_failed"))
    cause = rng.choice(("sha256:a", "sha256:b", ""))
    return [
        ("count", ({"harness": harness, "type": typ}, 60)),
        ("count", ({"harness": harness, "type": "restart", "cause_digest": cause}, 300)),
        ("exists", ({"run": rng.choice(("r1", "r2", ""))}, 10)),
        ("distinct", ("run", {"type": typ}, 500)),
        ("distinct", ("harness", {"type": typ, "cause_digest": cause}, 120)),
        ("count", ({}, 40)),
    ]


def test_window_index_agrees_with_sql_host_at_every_row(journal: sqlite3.Connection) -> None:
    fast = WindowIndex(SHAPES)
    slow = SqlHost(journal)
    rng = random.Random(11)
    compared = 0
    nonzero = 0
    for row in journal.execute(ROW_SELECT + " ORDER BY seq").fetchall():
        fast.feed(row)
        slow.feed(row)
        for fn, args in _queries(row, rng):
            got = getattr(fast, fn)(*args)
            want = getattr(slow, fn)(*args)
            assert got == want, (row[0], fn, args)
            compared += 1
            nonzero += bool(want)
    assert compared == 1500 * 6
    assert nonzero > compared // 3  # the comparison is not between two zeros


def _restart(seq: int, at: int) -> tuple[object, ...]:
    return (seq, at, "run_event", "restart", "o", "h", *([None] * 10))


def test_window_edge_excludes_at_equal_to_now_minus_window(tmp_path: Path) -> None:
    conn = connect(tmp_path / "e.db")
    rows = [
        _restart(1, 1000),
        _restart(2, 1500),
        _restart(3, 2000),
    ]  # fmt: skip
    conn.executemany(INSERT, rows)
    fast = WindowIndex([Shape("count", ("type",), 1000)])
    sql = SqlHost(conn)
    for row in conn.execute(ROW_SELECT + " ORDER BY seq"):
        fast.feed(row)
        sql.feed(row)
    # now = 2000, window 1000: at 1000 is out (at > now - window), 1500 and 2000 are in.
    assert fast.count({"type": "restart"}, 1000) == 2
    assert sql.count({"type": "restart"}, 1000) == 2


def test_rows_with_equal_at_but_later_seq_are_not_seen(tmp_path: Path) -> None:
    conn = connect(tmp_path / "f.db")
    rows = [
        _restart(1, 5000),
        _restart(2, 5000),
    ]  # fmt: skip
    conn.executemany(INSERT, rows)
    first = conn.execute(ROW_SELECT + " WHERE seq = 1").fetchone()
    fast = WindowIndex([Shape("count", ("type",), 60_000)])
    fast.feed(first)
    sql = SqlHost(conn)
    sql.feed(first)
    assert fast.count({"type": "restart"}, 60_000) == 1
    assert sql.count({"type": "restart"}, 60_000) == 1


def test_results_saturate(monkeypatch: pytest.MonkeyPatch, journal: sqlite3.Connection) -> None:
    monkeypatch.setattr(window, "SATURATION", 7)
    monkeypatch.setattr(host_sql, "SATURATION", 7)
    fast = WindowIndex([Shape("count", (), 10**9), Shape("distinct", (), 10**9, field="harness")])
    slow = SqlHost(journal)
    for row in journal.execute(ROW_SELECT + " ORDER BY seq"):
        fast.feed(row)
    slow.feed(row)
    assert fast.count({}, 10**9) == 7
    assert slow.count({}, 10**9) == 7
    assert fast.distinct("harness", {}, 10**9) == 3  # under the cap: exact


def test_unknown_shape_and_unindexed_literal_refuse_instead_of_undercounting() -> None:
    fast = WindowIndex([Shape("count", ("type",), 100, literals=(("type", "restart"),))])
    row = (1, 10, "run_event", "restart", "o", "h", "", "", "", "", "", "", "", "", "", 0)
    fast.feed(row)
    assert fast.count({"type": "restart"}, 100) == 1
    with pytest.raises(SelectorNotIndexed):
        fast.count({"type": "tool_call"}, 100)
    with pytest.raises(SelectorNotIndexed):
        fast.count({"harness": "h"}, 100)
    with pytest.raises(SelectorNotIndexed):
        fast.count({"type": "restart"}, 200)


def test_literal_filter_skips_rows_the_rules_cannot_ask_about() -> None:
    fast = WindowIndex(
        [Shape("count", ("harness", "type"), 10**6, literals=(("type", "restart"),))]
    )
    for seq in range(1, 101):
        typ = "restart" if seq % 10 == 0 else "tool_call"
        fast.feed((seq, seq, "run_event", typ, "o", "h", "", "", "", "", "", "", "", "", "", 0))
    assert fast.entries() == 10
    assert fast.count({"harness": "h", "type": "restart"}, 10**6) == 10


def test_sweep_bounds_memory_to_the_window() -> None:
    fast = WindowIndex([Shape("count", ("harness",), 100), Shape("distinct", (), 100, field="run")])
    for seq in range(1, 20_001):
        fast.feed(
            (
                seq,
                seq,
                "run_event",
                "t",
                "o",
                f"h{seq}",
                "",
                f"r{seq % 7}",
                "",
                "",
                "",
                "",
                "",
                "",
                "",
                0,
            )
        )
    fast.sweep()
    # 100 ms window at one row per ms: about 100 rows per index survive, not 20,000.
    assert fast.entries() <= 2 * 101
    assert fast.distinct("run", {}, 100) == 7


def _rule(when: str, primitives: tuple[object, ...] = ()) -> object:
    class R:
        pass

    r = R()
    r.when = when  # type: ignore[attr-defined]
    r.primitives = primitives  # type: ignore[attr-defined]
    return r


def test_plan_finds_guards_and_literal_selector_values() -> None:
    from engine.rules.language.model import PrimitiveSpec

    spec = PrimitiveSpec(0, "count", None, ("harness", "type", "cause_digest"), 3_600_000)
    plan = plan_rule(
        _rule(
            'event.type == "restart" && event.harness in ["h1", "h2"] && '
            'count({"harness": event.harness, "type": event.type, '
            '"cause_digest": event.cause_digest}, duration("1h")) >= 3',
            (spec,),
        )
    )
    assert dict(plan.guards) == {"type": frozenset({"restart"}), "harness": frozenset({"h1", "h2"})}
    (shape,) = plan.shapes
    assert shape.keys == ("cause_digest", "harness", "type")
    assert dict(shape.literals) == {"type": "restart"}  # event.type is guarded to one literal
    assert shape.window_ms == 3_600_000


def test_plan_takes_no_guard_from_a_disjunction_or_negation() -> None:
    plan = plan_rule(_rule('event.type == "a" || event.type == "b"'))
    assert plan.guards == ()
    plan = plan_rule(_rule('!(event.type == "a") && event.harness != "x"'))
    assert plan.guards == ()


def test_plan_of_unparsable_text_falls_back_to_unfiltered_shapes() -> None:
    from engine.rules.language.model import PrimitiveSpec

    spec = PrimitiveSpec(0, "distinct", "run", ("path",), 60_000)
    plan = plan_rule(_rule("this is ( not cel", (spec,)))
    assert plan.guards == ()
    assert plan.shapes == (Shape("distinct", ("path",), 60_000, "run"),)


def test_sql_host_and_window_index_give_identical_fires_on_the_simulated_fleet(
    tmp_path: Path,
) -> None:
    """The whole evaluator over one simulated day, once per host: the same fires."""
    from engine.fleet.sim import write_fleet
    from engine.rules.evaluation.evaluator import RowEvaluator, fast_host_for
    from tests.rules.test_equivalence import all_rules

    conn = connect(tmp_path / "sim.db")
    write_fleet(conn, days=2, validate=False)
    rules = all_rules()
    rows = conn.execute(ROW_SELECT + " ORDER BY seq").fetchall()
    fast = RowEvaluator(rules, fast_host_for(rules))
    slow_host = SqlHost(conn)
    slow = RowEvaluator(rules, slow_host)
    fast_fires = [f.key() for r in rows for f in fast.process(r)]
    slow_fires = [f.key() for r in rows for f in slow.process(r)]
    assert fast_fires == slow_fires
    assert len(fast_fires) > 500 and slow_host.queries > 1000
    assert fast.rule_errors == slow.rule_errors == []
