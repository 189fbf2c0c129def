"""Scenario expectations (inclusion, exact sets, absence), coverage and explain."""

from __future__ import annotations

from typing import Any

import pytest

from engine.skillspec.decide import compile_spec, decide
from engine.skillspec.scenarios import (
    compare_expectation,
    coverage,
    render_coverage,
    render_run,
    run_tests,
)
from engine.skillspec.spec_explain import explain, render_explanation

SPEC: dict[str, Any] = {
    "schema": "skillspec/v0",
    "id": "t.scen",
    "title": "t",
    "description": "t",
    "routes": [
        {"id": "local", "label": "L", "rank": 10},
        {
            "id": "browser",
            "label": "B",
            "rank": 20,
            "execution_plan": {
                "phases": [
                    {"id": "open", "jumps": [{"when": "blocked", "to_phase": "ask"}]},
                    {"id": "ask"},
                ]
            },
        },
        {"id": "unused", "label": "U"},
    ],
    "rules": [
        {
            "id": "browse_rule",
            "when": {"user_says_any": ["browse"]},
            "prefer": "browser",
            "forbid": ["native_search", "curl"],
            "elicit": ["mode"],
            "after_success": ["remember"],
        },
        {"id": "never_tested", "when": {"user_says_any": ["deploy"]}, "forbid": ["force_push"]},
        {"id": "harmless", "when": {"user_says_any": ["hello"]}, "reason": "greeting"},
    ],
    "tests": [],
}

BROWSE = decide(compile_spec(SPEC), "browse the site")


@pytest.mark.parametrize(
    ("expect", "failing"),
    [
        ({"route": "browser"}, []),
        ({"route": "local"}, ["route"]),
        ({"route_order": ["local", "browser", "unused"]}, []),
        ({"route_order": ["browser", "local", "unused"]}, ["route_order"]),
        ({"plan_phases": ["open", "ask"]}, []),
        ({"plan_phases": ["open"]}, ["plan_phases"]),
        ({"plan_jumps": ["open:blocked->ask"]}, []),
        ({"plan_jumps": ["open:blocked->ask", "ask:x->open"]}, ["plan_jumps"]),
        ({"forbid": ["curl"]}, []),
        ({"forbid": ["curl", "wget"]}, ["forbid"]),
        ({"forbid_exact": ["curl", "native_search"]}, []),
        ({"forbid_exact": ["curl", "native_search", "curl"]}, []),
        ({"forbid_exact": ["curl"]}, ["forbid_exact"]),
        ({"forbid_exact": []}, ["forbid_exact"]),
        ({"not_forbid": ["wget"]}, []),
        ({"not_forbid": ["curl"]}, ["not_forbid"]),
        ({"elicit": ["mode"], "elicit_exact": ["mode"], "not_elicit": ["other"]}, []),
        ({"elicit_exact": []}, ["elicit_exact"]),
        ({"not_elicit": ["mode"]}, ["not_elicit"]),
        ({"after_success": ["remember"], "after_success_exact": ["remember"]}, []),
        ({"after_success": ["forget"]}, ["after_success"]),
        ({"not_after_success": ["remember"]}, ["not_after_success"]),
        ({"matched_rules": ["browse_rule"], "matched_rules_exact": ["browse_rule"]}, []),
        ({"matched_rules": ["harmless"]}, ["matched_rules"]),
        ({"matched_rules_exact": ["browse_rule", "harmless"]}, ["matched_rules_exact"]),
        ({"not_matched_rules": ["browse_rule"]}, ["not_matched_rules"]),
        ({"not_matched_rules": ["harmless"]}, []),
        (
            {"route": "local", "forbid": ["wget"], "not_elicit": ["mode"]},
            ["route", "forbid", "not_elicit"],
        ),
    ],
)
def test_expectation_forms(expect: dict[str, Any], failing: list[str]) -> None:
    failures = compare_expectation(BROWSE, expect)
    assert [f.expectation for f in failures] == failing


def test_failure_says_expected_and_got() -> None:
    [failure] = compare_expectation(BROWSE, {"route": "local"})
    assert (failure.expected, failure.got) == ("local", "browser")
    assert "expected route local, got browser" in failure.message
    [failure] = compare_expectation(BROWSE, {"forbid_exact": ["curl"]})
    assert failure.expected == ["curl"] and failure.got == ["curl", "native_search"]


def test_empty_plan_when_route_has_none() -> None:
    local = decide(compile_spec(SPEC), "nothing")
    [failure] = compare_expectation(local, {"plan_phases": ["open"]})
    assert failure.got == []


def _with_tests(tests: list[dict[str, Any]]) -> Any:
    return compile_spec({**SPEC, "tests": tests})


def test_run_and_report() -> None:
    compiled = _with_tests(
        [
            {"name": "browse ok", "input": "browse it", "expect": {"route": "browser"}},
            {"name": "wrong", "input": "hello", "expect": {"route": "browser", "forbid": ["x"]}},
        ]
    )
    result = run_tests(compiled)
    assert [r.passed for r in result.results] == [True, False]
    assert not result.ok and len(result.failed) == 1
    text = render_run(result, "spec")
    assert "FAIL wrong" in text and "input: 'hello'" in text
    assert "route: expected route browser, got local" in text
    assert "1 passed, 1 failed, 2 total" in text
    assert result.to_json()["tests"][1]["failures"][1]["expectation"] == "forbid"


def test_coverage_lists_untested_rules_and_routes() -> None:
    compiled = _with_tests(
        [
            {"name": "b", "input": "browse", "expect": {"route": "browser"}},
            {"name": "h", "input": "hello", "expect": {"route": "local"}},
        ]
    )
    cov = coverage(compiled, run_tests(compiled))
    assert cov.rules_uncovered == ("never_tested",)
    assert cov.rules_uncovered_obligated == ("never_tested",)
    assert cov.routes_unselected == ("unused",)
    assert not cov.complete
    text = render_coverage(cov)
    assert "2/3 rules" in text and "never_tested (route-changing, forbid or elicit" in text
    assert "route not selected by any test: unused" in text
    compiled = _with_tests([{"name": "h", "input": "hello", "expect": {"route": "local"}}])
    cov = coverage(compiled, run_tests(compiled))
    assert cov.rules_uncovered == ("browse_rule", "never_tested")
    assert "harmless" not in cov.rules_uncovered_obligated


def test_explain_agrees_with_decide_and_says_why() -> None:
    compiled = compile_spec(SPEC)
    exp = explain(compiled, "Browse the deploys, not the deployments")
    assert exp.decision.to_json() == decide(compiled, exp.decision.input).to_json()
    by_id = {r.id: r for r in exp.rules}
    assert by_id["browse_rule"].matched
    assert "phrase 'browse' found" in by_id["browse_rule"].conditions[0].detail
    assert by_id["never_tested"].matched
    assert "as 'deploys'" in by_id["never_tested"].conditions[0].detail
    assert not by_id["harmless"].matched
    assert by_id["harmless"].why == "failed: user_says_any"
    assert "none of 'hello' found" in by_id["harmless"].conditions[0].detail
    effects = [(e.rule_id, e.effect) for e in exp.effects]
    assert effects[:2] == [("browse_rule", "prefer"), ("browse_rule", "forbid")]
    assert ("never_tested", "forbid") in effects
    assert "preferred by rule browse_rule" in exp.route_choice
    text = render_explanation(exp)
    assert "[not matched] harmless" in text and "effects, in order:" in text


def test_explain_plural_and_predicates() -> None:
    data = {
        **SPEC,
        "rules": [
            {"id": "p", "when": {"user_says_any": ["ticket"], "domain_object_task": True}},
            {"id": "q", "when": {"interactive_prompt_likely": True}},
            {"id": "e", "when": {}},
        ],
    }
    exp = explain(compile_spec(data), "two tickets")
    p, q, e = exp.rules
    assert p.matched and "as 'tickets'" in p.conditions[0].detail
    assert "keyword 'ticket'" in p.conditions[1].detail
    assert not q.matched and q.why == "failed: interactive_prompt_likely"
    assert "wanted true, input is false" in q.conditions[0].detail
    assert not e.matched and "never matches" in e.why
    assert "first by rank" in exp.route_choice
