"""AST checks: selectors, windows, call count, comprehension nesting, static cost."""

from __future__ import annotations

import pytest

from engine.config import RulesConfig
from engine.rules.language.celast import decode_checked, walk
from engine.rules.language.celenv import default_environment
from engine.rules.language.checks import MAX_COMPREHENSION_NESTING, check_ast
from engine.rules.language.loader import compile_rule_file
from engine.rules.language.model import PRIMITIVE_COST


def load(when: str, cost_limit: int = 10_000, on: str = "run_event") -> tuple[list[str], object]:
    text = f"name: r\non: {on}\nlevel: notify\ntarget: type\nwhen: {when!r}\n"
    res = compile_rule_file(text, "r.yml", "file", RulesConfig(cost_limit=cost_limit))
    return [e.message for e in res.errors], (res.rules[0] if res.rules else None)


def rejected(when: str, needle: str, cost_limit: int = 10_000) -> None:
    msgs, rule = load(when, cost_limit)
    assert rule is None and any(needle in m for m in msgs), msgs


C = 'count({"harness": event.harness}, duration("1h"))'


@pytest.mark.parametrize(
    ("when", "needle"),
    [
        ('count(event.n > 1 ? {"run": "a"} : {"run": "b"}, duration("1h")) > 0', "map literal"),
        ('count({"colour": "red"}, duration("1h")) > 0', "'colour' is not one of"),
        ('count({"n": "1"}, duration("1h")) > 0', "'n' is not one of"),
        ('count({event.type: "x"}, duration("1h")) > 0', "keys must be string literals"),
        ('count({"run": "a", "run": "b"}, duration("1h")) > 0', "repeated"),
        ('count({"run": "a"}, duration(event.type)) > 0', "literal duration"),
        ('count({"run": "a"}, duration("169h")) > 0', "168h"),
        ('count({"run": "a"}, duration("0s")) > 0', "positive"),
        ('count({"run": "a"}, duration("1h") + duration("1h")) > 0', "literal duration"),
        ('distinct(event.type, {"run": "a"}, duration("1h")) > 0', "distinct's field"),
        ('distinct("colour", {"run": "a"}, duration("1h")) > 0', "distinct's field"),
        ('[1, 2].exists(x, count({"run": "a"}, duration("1h")) > x)', "inside a comprehension"),
    ],
)
def test_primitive_contract_violations(when: str, needle: str) -> None:
    rejected(when, needle)


def test_window_of_exactly_168h_and_key_values_of_any_string_expression_are_fine() -> None:
    msgs, rule = load(
        'count({"harness": event.harness + "-x", "type": event.type}, duration("168h")) > 0'
    )
    assert rule is not None, msgs


def test_at_most_eight_calls() -> None:
    eight = " && ".join([f"{C} > {i}" for i in range(8)])
    assert load(eight)[1] is not None
    rejected(eight + f" && {C} > 9", "9 primitive calls")


def test_comprehension_nesting_limit() -> None:
    two = "[1].all(a, [2].all(b, a < b))"
    assert load(two)[1] is not None
    three = "[1].all(a, [2].all(b, [3].all(c, a < b && b < c)))"
    rejected(three, f"nest deeper than {MAX_COMPREHENSION_NESTING}")


def test_static_cost_counts_primitives_at_100_and_respects_the_limit() -> None:
    _, one = load(f"{C} > 1")
    _, two = load(f"{C} > 1 && {C} > 2")
    assert one is not None and two is not None
    assert two.rule.static_cost - one.rule.static_cost >= PRIMITIVE_COST
    limit = two.rule.static_cost - 1
    rejected(f"{C} > 1 && {C} > 2", "exceeds the cost limit", cost_limit=limit)
    assert load(f"{C} > 1 && {C} > 2", cost_limit=limit + 1)[1] is not None


def test_comprehension_cost_scales_with_the_literal_range() -> None:
    _, small = load("[1, 2].all(x, x > 0)")
    _, big = load("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, x > 0)")
    assert small is not None and big is not None
    assert big.rule.static_cost > small.rule.static_cost + 8


def test_primitive_specs_are_in_source_order() -> None:
    msgs, rule = load(
        'exists({"tool": "bash"}, duration("5m"))'
        ' || distinct("run", {"type": "x"}, duration("2h")) > 1'
        f" || {C} > 3"
    )
    assert rule is not None, msgs
    specs = rule.rule.primitives  # type: ignore[attr-defined]
    assert [(s.index, s.fn, s.field, s.window_ms) for s in specs] == [
        (0, "exists", None, 300_000),
        (1, "distinct", "run", 7_200_000),
        (2, "count", None, 3_600_000),
    ]


def test_check_errors_point_at_the_offending_call() -> None:
    text = (
        "name: r\non: run_event\nlevel: notify\ntarget: type\nwhen: >-\n"
        '  event.type == "x" &&\n'
        '  count({"bogus": "1"}, duration("1h")) > 0\n'
    )
    res = compile_rule_file(text, "r.yml", "file", RulesConfig())
    (e,) = res.errors
    assert e.location.line == 7
    assert text.splitlines()[6][e.location.col - 1 :].startswith("(")  # the call's paren


def test_decoder_sees_every_node_kind() -> None:
    env = default_environment()
    expr, errs = env.compile(
        "run_event",
        '{"a": [1u, 2.5, b"x", null, true]}["a"].size() == 5 && has(event.path) && -event.n < 0'
        " && [1].exists(x, x == 1)",
    )
    assert expr is not None, errs
    ast = decode_checked(expr.serialize())
    kinds = {n.kind for n, _ in walk(ast.root)}
    assert kinds >= {"map", "list", "const", "call", "select", "ident", "comp"}
    report = check_ast(ast, 10_000)
    assert report.findings == () and report.primitives == ()


def test_a_comprehension_in_another_ones_range_is_not_nested() -> None:
    # the range is evaluated once, outside the loop: only loop bodies nest
    ranged = "[1, 2].map(a, a + 1).map(b, b * 2).all(c, [c].all(d, d > 0))"
    msgs, rule = load(ranged)
    assert rule is not None, msgs
    rejected("[1].all(a, [2].all(b, [3].map(c, c).size() > 0))", "nest deeper")


def test_a_primitive_in_a_comprehension_range_runs_once_and_is_allowed() -> None:
    msgs, rule = load(f"[{C}].all(x, x >= 0)")
    assert rule is not None, msgs
    assert len(rule.rule.primitives) == 1  # type: ignore[attr-defined]
