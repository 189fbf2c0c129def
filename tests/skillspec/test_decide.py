"""The decide algebra, rule by rule, as the reference applies it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import InputError
from engine.skillspec.decide import (
    BASIS_DEFAULT,
    BASIS_ROUTE_ORDER,
    BASIS_RULE_PREFER,
    DEFAULT_REASON,
    Decision,
    compile_spec,
    decide,
    decision_json_line,
)
from engine.skillspec.matching import (
    BOOLEAN_PREDICATES,
    contains_phrase,
    normalize_input,
    predicate_value,
)
from engine.yamlsrc import parse_yaml

PINNED_KEYS = [
    "input",
    "route",
    "route_selection",
    "route_order",
    "forbid",
    "allow",
    "elicit",
    "after_success",
    "matched_rules",
    "reason",
]


def spec(rules: list[dict[str, Any]], routes: list[dict[str, Any]] | None = None) -> Any:
    return {
        "schema": "skillspec/v0",
        "id": "t.decide",
        "title": "t",
        "description": "t",
        "routes": routes
        if routes is not None
        else [{"id": "a", "label": "A", "rank": 1}, {"id": "b", "label": "B", "rank": 2}],
        "rules": rules,
    }


def run(
    rules: list[dict[str, Any]], text: str, routes: list[dict[str, Any]] | None = None
) -> Decision:
    return decide(compile_spec(spec(rules, routes)), text)


def rule(rid: str, *phrases: str, **effects: Any) -> dict[str, Any]:
    return {"id": rid, "when": {"user_says_any": list(phrases)}, **effects}


def test_json_has_exactly_the_pinned_keys() -> None:
    d = run([rule("r", "go", prefer="b", reason="why")], "go now")
    out = d.to_json()
    assert list(out) == PINNED_KEYS
    assert out["route_selection"] == {
        "route": "b",
        "basis": BASIS_RULE_PREFER,
        "rule_id": "r",
        "reason": "why",
    }
    assert out["matched_rules"] == [{"id": "r", "reason": "why"}]


def test_rules_apply_in_file_order_last_prefer_wins() -> None:
    rules = [rule("first", "go", prefer="a"), rule("second", "go", prefer="b")]
    d = run(rules, "go")
    assert d.route == "b"
    assert d.route_selection is not None and d.route_selection.rule_id == "second"
    assert d.matched_rule_ids == ("first", "second")
    d = run(list(reversed(rules)), "go")
    assert d.route == "a" and d.matched_rule_ids == ("second", "first")


def test_route_order_replaces_and_basis_is_route_order_default() -> None:
    rules = [
        rule("o1", "go", route_order=["a", "b"], reason="first order"),
        rule("o2", "go", route_order=["b", "a"]),
    ]
    d = run(rules, "go")
    assert d.route_order == ("b", "a")
    assert d.route == "b"
    sel = d.route_selection
    assert sel is not None and (sel.basis, sel.rule_id, sel.reason) == (
        BASIS_ROUTE_ORDER,
        "o2",
        None,
    )


def test_prefer_beats_route_order_even_when_order_comes_later() -> None:
    rules = [rule("p", "go", prefer="a"), rule("o", "go", route_order=["b", "a"])]
    d = run(rules, "go")
    assert d.route == "a" and d.route_order == ("b", "a")
    assert d.route_selection is not None and d.route_selection.basis == BASIS_RULE_PREFER


def test_default_route_order_by_rank_missing_rank_last_ties_in_file_order() -> None:
    routes = [
        {"id": "norank1", "label": "x"},
        {"id": "r5", "label": "x", "rank": 5},
        {"id": "r1a", "label": "x", "rank": 1},
        {"id": "norank2", "label": "x"},
        {"id": "r1b", "label": "x", "rank": 1},
        {"id": "neg", "label": "x", "rank": -3},
    ]
    d = run([], "anything", routes)
    assert d.route_order == ("neg", "r1a", "r1b", "r5", "norank1", "norank2")
    assert d.route == "neg"
    sel = d.route_selection
    assert sel is not None and (sel.basis, sel.rule_id, sel.reason) == (
        BASIS_DEFAULT,
        None,
        DEFAULT_REASON,
    )


def test_no_routes_no_selection() -> None:
    d = run([rule("r", "go", forbid=["x"])], "go", routes=[])
    assert d.route is None and d.route_selection is None and d.route_order == ()
    assert d.to_json()["route_selection"] is None


def test_lists_appended_then_deduped_keeping_first() -> None:
    rules = [
        rule("r1", "go", forbid=["x", "y", "x"], elicit=["q1"], after_success=["s1", "s2"]),
        rule("r2", "go", forbid=["z", "y"], elicit=["q2", "q1"], after_success=["s2", "s0"]),
    ]
    d = run(rules, "go")
    assert d.forbid == ("x", "y", "z")
    assert d.elicit == ("q1", "q2")
    assert d.after_success == ("s1", "s2", "s0")


def test_allow_merged_later_key_wins_and_sorted() -> None:
    rules = [
        rule("r1", "go", allow={"search": "url_only", "b": 1}),
        rule("r2", "go", allow={"search": "never", "a": {"k": [1]}}),
    ]
    d = run(rules, "go")
    assert d.allow == {"a": {"k": [1]}, "b": 1, "search": "never"}
    assert list(d.to_json()["allow"]) == ["a", "b", "search"]


def test_reason_is_last_non_empty() -> None:
    rules = [rule("r1", "go", reason="one"), rule("r2", "go"), rule("r3", "go", reason="")]
    d = run(rules, "go")
    assert d.reason == "one"
    assert [m.reason for m in d.matched_rules] == ["one", None, ""]
    assert run([rule("r2", "go")], "go").reason is None


def test_predicates_are_and_composed() -> None:
    r = {
        "id": "r",
        "when": {"user_says_any": ["deploy"], "interactive_prompt_likely": False},
        "prefer": "b",
    }
    assert run([r], "deploy the app").matched_rule_ids == ("r",)
    assert run([r], "deploy the app with my password").matched_rule_ids == ()
    assert run([r], "ship the app").matched_rule_ids == ()


def test_user_says_any_is_or() -> None:
    r = rule("r", "browse", "open page", "click")
    for text in ("browse it", "please open page 2", "click here"):
        assert run([r], text).matched_rule_ids == ("r",)
    assert run([r], "open the page").matched_rule_ids == ()


def test_user_says_all_groups_needs_every_group() -> None:
    r = {"id": "r", "when": {"user_says_all_groups": [["repo", "branch"], ["sync", "behind"]]}}
    assert run([r], "is my branch behind?").matched_rule_ids == ("r",)
    assert run([r], "repos in sync").matched_rule_ids == ("r",)
    assert run([r], "is my branch ok").matched_rule_ids == ()
    empty_group = {"id": "e", "when": {"user_says_all_groups": [["repo"], []]}}
    assert run([empty_group], "repo").matched_rule_ids == ()


def test_user_says_any_and_all_groups_together() -> None:
    r = {"id": "r", "when": {"user_says_any": ["check"], "user_says_all_groups": [["repo"]]}}
    assert run([r], "check the repo").matched_rule_ids == ("r",)
    assert run([r], "check the thing").matched_rule_ids == ()
    assert run([r], "the repo").matched_rule_ids == ()


@pytest.mark.parametrize(
    ("name", "yes", "no"),
    [
        ("task_recurrence_likely", "do it weekly", "do it now"),
        ("domain_object_task", "close the ticket", "close the door"),
        ("interactive_prompt_likely", "login first", "logout first"),
        ("command_likely_long_running", "tail the log", "read the log"),
    ],
)
def test_boolean_predicates_true_and_false(name: str, yes: str, no: str) -> None:
    want_true = {"id": "t", "when": {name: True}}
    want_false = {"id": "f", "when": {name: False}}
    assert run([want_true, want_false], yes).matched_rule_ids == ("t",)
    assert run([want_true, want_false], no).matched_rule_ids == ("f",)


def test_rules_without_a_usable_condition_never_match() -> None:
    rules = [
        {"id": "no_when", "prefer": "b"},
        {"id": "empty_when", "when": {}, "prefer": "b"},
        {"id": "empty_list", "when": {"user_says_any": []}, "prefer": "b"},
        {"id": "blank_phrases", "when": {"user_says_any": ["", "  "]}, "prefer": "b"},
    ]
    d = run(rules, "anything at all, even blank")
    assert d.matched_rule_ids == () and d.route == "a"


def test_x_predicates_are_refused_like_the_reference() -> None:
    data = spec([{"id": "r", "when": {"user_says_any": ["go"], "x-mood": "happy"}}])
    with pytest.raises(InputError) as err:
        compile_spec(data)
    assert "x-mood" in str(err.value) and "rules[0].when.x-mood" in err.value.diagnostics[0].path


def test_unknown_predicate_error_has_location() -> None:
    doc = parse_yaml(
        "schema: skillspec/v0\nid: t\nrules:\n  - id: r\n    when:\n      user_says_anyy: [go]\n",
        "spec.yml",
    )
    with pytest.raises(InputError) as err:
        compile_spec(doc.data)
    loc = err.value.diagnostics[0].location
    assert (loc.file, loc.line) == ("spec.yml", 6)


def test_non_matching_rules_leave_no_trace_in_decision() -> None:
    rules = [rule("hit", "go", forbid=["x"]), rule("miss", "stop", forbid=["y"], prefer="b")]
    d = run(rules, "go")
    assert d.forbid == ("x",) and d.route == "a" and d.matched_rule_ids == ("hit",)


def test_events_follow_the_reference_order() -> None:
    rules = [
        rule(
            "r1",
            "go",
            prefer="b",
            forbid=["x"],
            allow={"k": "v"},
            elicit=["q"],
            after_success=["s"],
            route_order=["b", "a"],
            reason="R",
        ),
        rule("r2", "nope"),
    ]
    d = decide(compile_spec(spec(rules)), "go", events=True)
    kinds = [e.event for e in d.events]
    assert kinds == [
        "input_received",
        "spec_loaded",
        "rule_evaluated",
        "rule_matched",
        "route_selected",
        "route_order_set",
        "forbid_added",
        "allow_added",
        "elicitation_requested",
        "after_success_scheduled",
        "rule_evaluated",
        "outcome_recorded",
    ]
    assert d.events[2].data == {"rule_id": "r1", "matched": True}
    assert d.events[-2].data == {"rule_id": "r2", "matched": False}
    assert d.events[-1].data["matched_rules"] == ["r1"]
    # deciding with and without events gives the same decision
    plain = decide(compile_spec(spec(rules)), "go")
    assert plain.to_json() == d.to_json() and plain.events == ()


def test_default_selection_emits_route_selected_after_rules() -> None:
    d = decide(compile_spec(spec([rule("r", "go", route_order=["b", "a"])])), "go", events=True)
    selected = [e for e in d.events if e.event == "route_selected"]
    assert len(selected) == 1 and selected[0].data["basis"] == BASIS_ROUTE_ORDER


def test_plan_of_selected_route() -> None:
    routes = [
        {
            "id": "a",
            "label": "A",
            "rank": 1,
            "execution_plan": {
                "phases": [
                    {"id": "p1", "jumps": [{"when": "fails", "to_phase": "p2"}]},
                    {"id": "p2"},
                ]
            },
        },
    ]
    d = run([], "x", routes)
    assert d.plan is not None
    assert d.plan.phases == ("p1", "p2") and d.plan.jumps == ("p1:fails->p2",)


def test_many_rules_only_touched_ones_match() -> None:
    rules = [rule(f"r{i}", f"word{i}", forbid=[f"f{i}"]) for i in range(300)]
    rules.append({"id": "bool", "when": {"domain_object_task": True}, "elicit": ["q"]})
    compiled = compile_spec(spec(rules))
    d = decide(compiled, "word7 and word250 and word3s, not words1, on the repo")
    assert d.matched_rule_ids == ("r3", "r7", "r250", "bool")
    assert d.forbid == ("f3", "f7", "f250") and d.elicit == ("q",)


@pytest.mark.parametrize(
    "text",
    ["go", 'go "quoted" \\ back\nslash\ttab \x01 ctrl', "go café ☃ \u2028 emoji 🎉", "nothing"],
)
@pytest.mark.parametrize("with_routes", [True, False])
def test_fast_json_line_is_identical_to_json_dumps(text: str, with_routes: bool) -> None:
    rules = [
        rule(
            "r1",
            "go",
            prefer="b",
            forbid=["x", "ü"],
            allow={"k": {"n": [1, 2.5, None]}},
            reason='say "hi"',
        ),
        rule("r2", "go", route_order=["b", "a"], elicit=["q"], after_success=["s"]),
    ]
    d = run(rules, text, None if with_routes else [])
    assert decision_json_line(d) == json.dumps(d.to_json(), ensure_ascii=False)


# --- a straightforward model of the reference, to check the indexed fast path against

_VOCAB = ["go", "gos", "stop", "in sync", "a-b", "test", "weekly", "login", "repo", "x_y", ""]


def _model(data: dict[str, Any], text: str) -> dict[str, Any]:
    low = normalize_input(text)

    def holds(when: dict[str, Any]) -> bool:
        conditions = []
        if when.get("user_says_any"):
            conditions.append(any(contains_phrase(low, p) for p in when["user_says_any"]))
        for group in when.get("user_says_all_groups") or []:
            conditions.append(any(contains_phrase(low, p) for p in group))
        for name in BOOLEAN_PREDICATES:
            if name in when:
                conditions.append(predicate_value(name, low) == when[name])
        return bool(conditions) and all(conditions)

    ranked = sorted(data["routes"], key=lambda r: r.get("rank", 2**63 - 1))
    order = [r["id"] for r in ranked]
    route = basis = rule_id = None
    reason_sel: Any = None
    order_rule: Any = None
    forbid: list[str] = []
    matched = []
    for r in data["rules"]:
        if not holds(r.get("when") or {}):
            continue
        matched.append(r["id"])
        if r.get("prefer"):
            route, basis, rule_id, reason_sel = r["prefer"], "rule_prefer", r["id"], r.get("reason")
        if r.get("route_order"):
            order, order_rule = r["route_order"], r
        forbid += r.get("forbid", [])
    if route is None and order:
        route = order[0]
        if order_rule is not None:
            basis, rule_id, reason_sel = (
                "route_order_default",
                order_rule["id"],
                order_rule.get("reason"),
            )
        else:
            basis, rule_id, reason_sel = "default_route_order", None, DEFAULT_REASON
    return {
        "route": route,
        "basis": basis,
        "rule_id": rule_id,
        "selection_reason": reason_sel,
        "order": list(order),
        "forbid": list(dict.fromkeys(forbid)),
        "matched": matched,
    }


_phrases = st.lists(st.sampled_from(_VOCAB), max_size=3)
_when = st.fixed_dictionaries(
    {},
    optional={
        "user_says_any": _phrases,
        "user_says_all_groups": st.lists(_phrases, max_size=2),
        "task_recurrence_likely": st.booleans(),
        "interactive_prompt_likely": st.booleans(),
        "command_likely_long_running": st.booleans(),
    },
)
_rule = st.fixed_dictionaries(
    {"when": _when},
    optional={
        "prefer": st.sampled_from(["a", "b", "c"]),
        "route_order": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3),
        "forbid": st.lists(st.sampled_from(["f1", "f2", "f3"]), max_size=3),
        "reason": st.sampled_from(["r1", "r2"]),
    },
)
_routes = st.lists(
    st.fixed_dictionaries({}, optional={"rank": st.integers(-2, 2)}), min_size=0, max_size=3
)


@settings(max_examples=250, deadline=None)
@given(
    rules=st.lists(_rule, max_size=6),
    routes=_routes,
    words=st.lists(st.sampled_from([*_VOCAB, "Go!", "GOS", "ago", "sync", "in", "b"]), max_size=6),
)
def test_decide_agrees_with_a_plain_model(
    rules: list[dict[str, Any]], routes: list[dict[str, Any]], words: list[str]
) -> None:
    data = spec(
        [{"id": f"r{i}", **r} for i, r in enumerate(rules)],
        [{"id": rid, "label": rid, **r} for rid, r in zip("abc", routes, strict=False)],
    )
    text = " ".join(words)
    d = decide(compile_spec(data), text)
    want = _model(data, text)
    sel = d.route_selection
    got = {
        "route": d.route,
        "basis": sel.basis if sel else None,
        "rule_id": sel.rule_id if sel else None,
        "selection_reason": sel.reason if sel else None,
        "order": list(d.route_order),
        "forbid": list(d.forbid),
        "matched": list(d.matched_rule_ids),
    }
    assert got == want
