"""Explain one decision rule by rule: what matched, what did not, and why.

``decide`` is tuned for throughput and skips rules whose phrases cannot be
present; an explanation must instead look at every rule and say which phrase
or predicate held or failed. It re-evaluates each rule condition by condition
with the same matching functions, then asks ``build_decision`` for the effects
so the explanation can never disagree with ``decide`` about the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.skillspec.decide import (
    BASIS_DEFAULT,
    BASIS_ROUTE_ORDER,
    BASIS_RULE_PREFER,
    CompiledRule,
    CompiledSpec,
    Decision,
    build_decision,
)
from engine.skillspec.matching import (
    first_hit,
    normalize_input,
    normalize_phrase,
    predicate_evidence,
    predicate_value,
)


@dataclass(frozen=True, slots=True)
class ConditionResult:
    """One predicate of a rule's ``when`` and whether it held, in words."""

    predicate: str
    held: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"predicate": self.predicate, "held": self.held, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class RuleExplanation:
    id: str
    index: int
    matched: bool
    conditions: tuple[ConditionResult, ...]
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "index": self.index,
            "matched": self.matched,
            "why": self.why,
            "conditions": [c.to_json() for c in self.conditions],
        }


@dataclass(frozen=True, slots=True)
class EffectStep:
    """One effect of one matched rule, in the order it was applied."""

    rule_id: str
    effect: str
    value: Any
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "effect": self.effect,
            "value": self.value,
            "note": self.note,
        }


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    rules: tuple[RuleExplanation, ...]
    effects: tuple[EffectStep, ...]
    route_choice: str

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision.to_json(),
            "rules": [r.to_json() for r in self.rules],
            "effects": [e.to_json() for e in self.effects],
            "route_choice": self.route_choice,
        }


def _phrase_list(phrases: tuple[str, ...]) -> str:
    return ", ".join(repr(p) for p in phrases) if phrases else "(none)"


def _any_condition(text: str, phrases: tuple[str, ...], label: str) -> ConditionResult:
    hit = first_hit(text, phrases)
    if hit is not None:
        spelled = "" if hit.found == normalize_phrase(hit.phrase) else f" (as {hit.found!r})"
        return ConditionResult(label, True, f"phrase {hit.phrase!r} found{spelled}")
    usable = [p for p in phrases if normalize_phrase(p)]
    if not usable:
        why = "the group is empty" if not phrases else "every phrase is empty after trimming"
        return ConditionResult(label, False, why)
    return ConditionResult(label, False, f"none of {_phrase_list(phrases)} found")


def explain_rule(rule: CompiledRule, text: str) -> RuleExplanation:
    """Evaluate every condition of one rule against normalized ``text``."""
    conditions: list[ConditionResult] = []
    if rule.any_phrases:
        conditions.append(_any_condition(text, rule.any_phrases, "user_says_any"))
    for g, group in enumerate(rule.groups):
        conditions.append(_any_condition(text, group, f"user_says_all_groups[{g}]"))
    for name, expected in rule.booleans:
        value = predicate_value(name, text)
        if value:
            hit = predicate_evidence(name, text)
            basis = f"true (keyword {hit.phrase!r})" if hit else "true"
        else:
            basis = "false (no keyword for it in the input)"
        conditions.append(
            ConditionResult(
                name, value == expected, f"wanted {str(expected).lower()}, input is {basis}"
            )
        )
    if not rule.has_condition:
        why = "no predicate in when: a rule with nothing to match never matches"
        matched = False
    else:
        failed = [c for c in conditions if not c.held]
        matched = not failed
        why = (
            "all predicates held"
            if matched
            else "failed: " + ", ".join(c.predicate for c in failed)
        )
    return RuleExplanation(rule.id, rule.index, matched, tuple(conditions), why)


def _effects(rule: CompiledRule) -> list[EffectStep]:
    out: list[EffectStep] = []
    if rule.prefer is not None:
        out.append(EffectStep(rule.id, "prefer", rule.prefer, "sets the selected route"))
    if rule.route_order:
        out.append(
            EffectStep(rule.id, "route_order", list(rule.route_order), "replaces the route order")
        )
    if rule.forbid:
        out.append(EffectStep(rule.id, "forbid", list(rule.forbid), "appended"))
    if rule.allow:
        out.append(EffectStep(rule.id, "allow", dict(rule.allow), "merged, later keys win"))
    if rule.elicit:
        out.append(EffectStep(rule.id, "elicit", list(rule.elicit), "appended"))
    if rule.after_success:
        out.append(EffectStep(rule.id, "after_success", list(rule.after_success), "appended"))
    if rule.reason:
        out.append(EffectStep(rule.id, "reason", rule.reason, "becomes the decision reason"))
    return out


def _route_choice(decision: Decision) -> str:
    sel = decision.route_selection
    if sel is None:
        return "no route: the spec declares no routes and no rule preferred one"
    if sel.basis == BASIS_RULE_PREFER:
        return f"{sel.route}: preferred by rule {sel.rule_id} (the last matching rule with prefer)"
    if sel.basis == BASIS_ROUTE_ORDER:
        return (
            f"{sel.route}: first in the route order set by rule {sel.rule_id}; "
            "no matching rule preferred a route"
        )
    assert sel.basis == BASIS_DEFAULT
    return (
        f"{sel.route}: first by rank (missing rank last, ties in file order); "
        "no matching rule preferred or reordered routes"
    )


def explain(compiled: CompiledSpec, text: str) -> Explanation:
    """Explain how ``text`` is decided: every rule, the effects in order, the route."""
    norm = normalize_input(text)
    rules = tuple(explain_rule(rule, norm) for rule in compiled.rules)
    matched = [compiled.rules[r.index] for r in rules if r.matched]
    decision = build_decision(compiled, text, matched)
    effects = tuple(step for rule in matched for step in _effects(rule))
    return Explanation(decision, rules, effects, _route_choice(decision))


def render_explanation(exp: Explanation) -> str:
    """The human report of ``skillspec explain``."""
    d = exp.decision
    lines = [f"input: {d.input}", f"route: {d.route or '<none>'}"]
    if d.route_order:
        lines.append(f"route_order: {' -> '.join(d.route_order)}")
    lines.append(f"route choice: {exp.route_choice}")
    for key in ("forbid", "elicit", "after_success"):
        values = getattr(d, key)
        if values:
            lines.append(f"{key}: {', '.join(values)}")
    if d.allow:
        lines.append("allow: " + ", ".join(f"{k}={v}" for k, v in d.allow.items()))
    if d.reason:
        lines.append(f"reason: {d.reason}")
    lines.append("rules:")
    for rule in exp.rules:
        mark = "matched    " if rule.matched else "not matched"
        lines.append(f"  [{mark}] {rule.id}: {rule.why}")
        for cond in rule.conditions:
            lines.append(f"      {'+' if cond.held else '-'} {cond.predicate}: {cond.detail}")
    if exp.effects:
        lines.append("effects, in order:")
        for n, step in enumerate(exp.effects, 1):
            lines.append(f"  {n}. {step.rule_id}: {step.effect} {step.value} ({step.note})")
    else:
        lines.append("effects: none (no rule matched)")
    return "\n".join(lines)
