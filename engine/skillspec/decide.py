"""Decide an input against a SkillSpec: the rule algebra of the reference.

``compile_spec`` turns loaded spec data into a :class:`CompiledSpec` once
(phrase index, default route order, per-rule effects) so that ``decide`` can
run many inputs cheaply. The algebra, in file order over matching rules:
``prefer`` sets the route, ``route_order`` replaces the order, forbid / elicit /
after_success are appended (de-duplicated at the end, first occurrence kept),
``allow`` is merged (later key wins), and the reason is the last non-empty
one. When no rule preferred a route, the first route of the current order is
chosen; the basis says whether a rule's ``route_order`` or the default
rank order produced it. Everything here is UI-free and never imports Textual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from engine.errors import Diagnostic, InputError, Location
from engine.skillspec.decision import (
    CompiledRule,
    CompiledSpec,
    Decision,
    MatchedRule,
    RoutePlan,
    RouteSelection,
    TraceEvent,
    _enc_opt,
)

try:  # the C string encoder json.dumps uses (no ASCII escaping), without importing json
    from _json import encode_basestring as _enc
except ImportError:  # pragma: no cover - every CPython has _json
    from json.encoder import encode_basestring as _enc
from engine.skillspec.matching import (
    BOOLEAN_PREDICATES,
    PREDICATE_KEYWORDS,
    PhraseIndex,
    normalize_input,
    normalize_phrase,
)

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "BASIS_DEFAULT",
    "BASIS_ROUTE_ORDER",
    "BASIS_RULE_PREFER",
    "DEFAULT_REASON",
    "CompiledRule",
    "CompiledSpec",
    "Decision",
    "MatchedRule",
    "RoutePlan",
    "RouteSelection",
    "TraceEvent",
    "build_decision",
    "compile_spec",
    "decide",
    "decision_json_line",
    "matched_indices",
    "rule_matches",
]

BASIS_RULE_PREFER = "rule_prefer"
BASIS_ROUTE_ORDER = "route_order_default"
BASIS_DEFAULT = "default_route_order"
DEFAULT_REASON = "selected first route by rank/default order"
_NO_RANK = 2**63 - 1


def _enc_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_enc, values)) + "]"


_KNOWN_WHEN = frozenset(("user_says_any", "user_says_all_groups", *BOOLEAN_PREDICATES))


# --------------------------------------------------------------------------- compile


def _bad(message: str, node: Any, key: str | int | None, path: str) -> InputError:
    line = col = 0
    where = getattr(node, "where", None)
    if where is not None and key is not None:
        try:
            loc = where(key)
            line, col = int(loc.line), int(loc.col)
        except (KeyError, IndexError, AttributeError, TypeError):
            pass
    file = None
    pos = getattr(node, "pos", None)
    if pos is not None:
        file = getattr(pos, "file", None)
        if not line:
            line, col = int(getattr(pos, "line", 0)), int(getattr(pos, "col", 0))
    diag = Diagnostic(message, Location(file, line, col), path=path)
    return InputError(message, title="Spec cannot be decided", diagnostics=[diag])


def _str_list(node: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = node.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{key} must be a list of strings", node, key, f"{path}.{key}")
    return tuple(value)


def _line_of(node: Any) -> int:
    pos = getattr(node, "pos", None)
    return int(getattr(pos, "line", 0) or 0)


def _compile_rule(i: int, raw: Any, index: PhraseIndex) -> CompiledRule:
    path = f"rules[{i}]"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("id"), str):
        raise _bad("a rule must be a mapping with a string id", raw, None, path)
    when = raw.get("when") or {}
    if not isinstance(when, Mapping):
        raise _bad("when must be a mapping", raw, "when", f"{path}.when")
    for key in when:
        if key not in _KNOWN_WHEN:
            # The reference's predicate type rejects unknown fields, x- ones included,
            # so such a spec never reaches decide there; refuse here the same way.
            raise _bad(
                f"unknown predicate {key!r} (the reference rejects unknown fields in when, "
                "x- extensions included)",
                when,
                key,
                f"{path}.when.{key}",
            )
    any_phrases = _str_list(when, "user_says_any", f"{path}.when")
    groups_raw = when.get("user_says_all_groups") or []
    if not isinstance(groups_raw, list):
        raise _bad(
            "user_says_all_groups must be a list of lists",
            when,
            "user_says_all_groups",
            f"{path}.when.user_says_all_groups",
        )
    groups: list[tuple[str, ...]] = []
    for g, group in enumerate(groups_raw):
        if not isinstance(group, list) or not all(isinstance(p, str) for p in group):
            raise _bad(
                "each user_says_all_groups entry must be a list of strings",
                groups_raw,
                g,
                f"{path}.when.user_says_all_groups[{g}]",
            )
        groups.append(tuple(group))
    booleans: list[tuple[str, bool]] = []
    for name in BOOLEAN_PREDICATES:
        value = when.get(name)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise _bad(f"{name} must be true or false", when, name, f"{path}.when.{name}")
        booleans.append((name, value))

    def ids(phrases: Sequence[str]) -> frozenset[int]:
        out = {index.add(normalize_phrase(p)) for p in phrases}
        out.discard(-1)
        return frozenset(out)

    prefer = raw.get("prefer")
    reason = raw.get("reason")
    allow = raw.get("allow") or {}
    if not isinstance(allow, Mapping):
        raise _bad("allow must be a mapping", raw, "allow", f"{path}.allow")
    return CompiledRule(
        index=i,
        id=raw["id"],
        any_phrases=any_phrases,
        any_ids=ids(any_phrases),
        groups=tuple(groups),
        group_ids=tuple(ids(g) for g in groups),
        booleans=tuple(booleans),
        has_condition=bool(any_phrases or groups or booleans),
        prefer=prefer if isinstance(prefer, str) else None,
        route_order=_str_list(raw, "route_order", path),
        forbid=_str_list(raw, "forbid", path),
        allow=tuple((str(k), v) for k, v in allow.items()),
        elicit=_str_list(raw, "elicit", path),
        after_success=_str_list(raw, "after_success", path),
        reason=reason if isinstance(reason, str) else None,
        line=_line_of(raw),
    )


def _plan_of(route: Mapping[str, Any]) -> RoutePlan | None:
    plan = route.get("execution_plan")
    if not isinstance(plan, Mapping):
        return None
    phases: list[str] = []
    jumps: list[str] = []
    for phase in plan.get("phases") or []:
        if not isinstance(phase, Mapping):
            continue
        pid = str(phase.get("id"))
        phases.append(pid)
        for jump in phase.get("jumps") or []:
            if isinstance(jump, Mapping):
                jumps.append(f"{pid}:{jump.get('when')}->{jump.get('to_phase')}")
    return RoutePlan(tuple(phases), tuple(jumps))


def compile_spec(data: Mapping[str, Any]) -> CompiledSpec:
    """Prepare loaded spec data for deciding; raises InputError on shapes decide cannot use."""
    if not isinstance(data, Mapping):
        raise _bad("the spec must be a mapping", data, None, "")
    routes_raw = data.get("routes") or []
    routes: list[tuple[str, int]] = []
    plans: dict[str, RoutePlan] = {}
    route_checks: dict[str, tuple[str, ...]] = {}
    for r, route in enumerate(routes_raw if isinstance(routes_raw, list) else []):
        if not isinstance(route, Mapping) or not isinstance(route.get("id"), str):
            raise _bad("a route must be a mapping with a string id", routes_raw, r, f"routes[{r}]")
        rank = route.get("rank")
        routes.append((route["id"], rank if isinstance(rank, int) else _NO_RANK))
        checks = route.get("checks")
        if isinstance(checks, list) and route["id"] not in route_checks:
            route_checks[route["id"]] = tuple(str(c) for c in checks)
        plan = _plan_of(route)
        if plan is not None and route["id"] not in plans:
            plans[route["id"]] = plan
    order = tuple(rid for rid, _ in sorted(routes, key=lambda item: item[1]))  # stable
    index = PhraseIndex(())
    rules_raw = data.get("rules") or []
    rules = tuple(
        _compile_rule(i, raw, index)
        for i, raw in enumerate(rules_raw if isinstance(rules_raw, list) else [])
    )
    # the boolean predicates are keyword lists: search them in the same single pass
    bool_ids = {
        name: frozenset(index.add(normalize_phrase(w)) for w in words)
        for name, words in PREDICATE_KEYWORDS.items()
    }
    phrase_rules: dict[int, list[int]] = {}
    always: set[int] = set()
    for rule in rules:
        if not rule.has_condition:
            continue
        if rule.uses_phrases:
            for pid in rule.any_ids.union(*rule.group_ids):
                phrase_rules.setdefault(pid, []).append(rule.index)
        else:
            always.add(rule.index)
    trace = data.get("trace") if isinstance(data.get("trace"), Mapping) else {}
    assert isinstance(trace, Mapping)
    record = trace.get("record") or []
    tests_raw = data.get("tests") or []
    return CompiledSpec(
        skill_id=str(data.get("id", "")),
        schema=str(data.get("schema", "")),
        routes=tuple(rid for rid, _ in routes),
        default_route_order=order,
        rules=rules,
        plans=plans,
        route_checks=route_checks,
        trace_required=trace.get("required") is True,
        trace_record=tuple(str(x) for x in record) if isinstance(record, list) else (),
        tests=tuple(t for t in tests_raw if isinstance(t, Mapping))
        if isinstance(tests_raw, list)
        else (),
        index=index,
        phrase_rules={k: tuple(v) for k, v in phrase_rules.items()},
        always_eval=frozenset(always),
        bool_ids=bool_ids,
        only_any=frozenset(r.index for r in rules if r.only_any),
        entries=tuple(r.entry for r in rules),
    )


# --------------------------------------------------------------------------- decide


def rule_matches(compiled: CompiledSpec, rule: CompiledRule, found: AbstractSet[int]) -> bool:
    """All specified predicates must hold; a rule with none never matches.

    ``found`` is the set of phrase ids present in the input (``compiled.index.find``);
    the boolean predicates are answered from the same set through their keywords.
    """
    if not rule.has_condition:
        return False
    if rule.any_phrases and rule.any_ids.isdisjoint(found):
        return False
    for ids in rule.group_ids:
        if ids.isdisjoint(found):
            return False
    bool_ids = compiled.bool_ids
    for name, expected in rule.booleans:  # noqa: SIM110 (a plain loop is faster here)
        if bool_ids[name].isdisjoint(found) is expected:
            return False
    return True


def _dedupe(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def decide(compiled: CompiledSpec, text: str, *, events: bool = False) -> Decision:
    """Decide one input. With ``events`` the decision also carries the reference's event list.

    Only rules that a found phrase touches (plus rules with boolean predicates
    only) are evaluated: a rule with phrases none of which is present cannot match.
    """
    rules = compiled.rules
    matched = [rules[i] for i in matched_indices(compiled, text)]
    return build_decision(compiled, text, matched, events=events)


def matched_indices(compiled: CompiledSpec, text: str) -> tuple[int, ...]:
    """Indices of the rules ``text`` matches, in file order."""
    found = compiled.index.find(normalize_input(text))
    candidates: set[int] = set(compiled.always_eval)
    phrase_rules = compiled.phrase_rules
    for pid in found:
        hit = phrase_rules.get(pid)
        if hit:
            candidates.update(hit)
    rules = compiled.rules
    simple = compiled.only_any
    return tuple(
        i for i in sorted(candidates) if i in simple or rule_matches(compiled, rules[i], found)
    )


def build_decision(
    compiled: CompiledSpec,
    text: str,
    matched: Sequence[CompiledRule],
    *,
    events: bool = False,
) -> Decision:
    """Apply matched rules' effects in file order and choose the route."""
    route: str | None = None
    selection: RouteSelection | None = None
    order: tuple[str, ...] = compiled.default_route_order
    order_source: CompiledRule | None = None
    forbid: list[str] = []
    elicit: list[str] = []
    after: list[str] = []
    allow: dict[str, Any] = {}
    reason: str | None = None
    for rule in matched:
        if rule.prefer is not None:
            route = rule.prefer
            selection = RouteSelection(route, BASIS_RULE_PREFER, rule.id, rule.reason)
        if rule.route_order:
            order = rule.route_order
            order_source = rule
        if rule.forbid:
            forbid.extend(rule.forbid)
        if rule.elicit:
            elicit.extend(rule.elicit)
        if rule.after_success:
            after.extend(rule.after_success)
        if rule.allow:
            allow.update(rule.allow)
        if rule.reason:
            reason = rule.reason
    if route is None and order:
        route = order[0]
        if order_source is not None:
            selection = RouteSelection(
                route, BASIS_ROUTE_ORDER, order_source.id, order_source.reason
            )
        else:
            selection = RouteSelection(route, BASIS_DEFAULT, None, DEFAULT_REASON)
    entries = compiled.entries
    matched_rules = tuple(entries[r.index] for r in matched)
    return Decision(
        input=text,
        route=route,
        route_selection=selection,
        route_order=order,
        forbid=_dedupe(forbid),
        allow={k: allow[k] for k in sorted(allow)} if allow else {},
        elicit=_dedupe(elicit),
        after_success=_dedupe(after),
        matched_rules=matched_rules,
        reason=reason,
        plan=compiled.plans.get(route) if route is not None else None,
        events=_events(compiled, text, matched, selection) if events else (),
    )


def _events(
    compiled: CompiledSpec,
    text: str,
    matched: Sequence[CompiledRule],
    final: RouteSelection | None,
) -> tuple[TraceEvent, ...]:
    """The reference's event sequence for a decision, in the order it emits them."""
    log = [
        TraceEvent("input_received", {"input": text}),
        TraceEvent("spec_loaded", {"skill_id": compiled.skill_id, "schema": compiled.schema}),
    ]
    hit = {r.index for r in matched}
    for rule in compiled.rules:
        is_hit = rule.index in hit
        log.append(TraceEvent("rule_evaluated", {"rule_id": rule.id, "matched": is_hit}))
        if not is_hit:
            continue
        log.append(TraceEvent("rule_matched", {"rule_id": rule.id, "reason": rule.reason}))
        if rule.prefer is not None:
            sel = RouteSelection(rule.prefer, BASIS_RULE_PREFER, rule.id, rule.reason)
            log.append(TraceEvent("route_selected", sel.to_json()))
        if rule.route_order:
            log.append(TraceEvent("route_order_set", {"route_order": list(rule.route_order)}))
        if rule.forbid:
            log.append(TraceEvent("forbid_added", {"forbid": list(rule.forbid)}))
        if rule.allow:
            log.append(TraceEvent("allow_added", {"allow": dict(sorted(rule.allow))}))
        if rule.elicit:
            log.append(TraceEvent("elicitation_requested", {"elicit": list(rule.elicit)}))
        if rule.after_success:
            data = {"after_success": list(rule.after_success)}
            log.append(TraceEvent("after_success_scheduled", data))
    if final is not None and final.basis != BASIS_RULE_PREFER:
        log.append(TraceEvent("route_selected", final.to_json()))
    log.append(
        TraceEvent(
            "outcome_recorded",
            {
                "route": None if final is None else final.route,
                "route_selection": None if final is None else final.to_json(),
                "matched_rules": [r.id for r in matched],
            },
        )
    )
    return tuple(log)


def allow_json(allow: Mapping[str, Any]) -> str:
    """``allow`` as ``json.dumps`` writes it in a decision line (json loaded only when needed)."""
    import json

    return json.dumps(dict(allow), ensure_ascii=False, default=str)


def decision_json_line(decision: Decision) -> str:
    """``json.dumps(decision.to_json(), ensure_ascii=False)``, built about twice as fast.

    Batch mode spends most of its time encoding; every value here is a string,
    a list of strings or null except ``allow``, which goes through json.dumps.
    A test checks the two encodings are identical on every corpus input.
    """
    sel = decision.route_selection
    sel_json = (
        "null"
        if sel is None
        else f'{{"route": {_enc(sel.route)}, "basis": {_enc(sel.basis)}, '
        f'"rule_id": {_enc_opt(sel.rule_id)}, "reason": {_enc_opt(sel.reason)}}}'
    )
    allow = allow_json(decision.allow) if decision.allow else "{}"
    matched = ", ".join(
        m.json or f'{{"id": {_enc(m.id)}, "reason": {_enc_opt(m.reason)}}}'
        for m in decision.matched_rules
    )
    return (
        f'{{"input": {_enc(decision.input)}, "route": {_enc_opt(decision.route)}, '
        f'"route_selection": {sel_json}, "route_order": {_enc_list(decision.route_order)}, '
        f'"forbid": {_enc_list(decision.forbid)}, "allow": {allow}, '
        f'"elicit": {_enc_list(decision.elicit)}, '
        f'"after_success": {_enc_list(decision.after_success)}, '
        f'"matched_rules": [{matched}], "reason": {_enc_opt(decision.reason)}}}'
    )
