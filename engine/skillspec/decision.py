"""The values deciding produces and runs on: compiled rules and specs, decisions, selections.

Kept apart from :mod:`engine.skillspec.decide` (the algebra) so that module
reads as the algorithm. They are :class:`~engine.record.Record` classes, not
frozen dataclasses: ``skillspec test`` imports them on every run and would
otherwise load ``dataclasses`` and ``inspect`` (and generate every method
through ``exec``) before checking a single scenario.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.record import Record
from engine.skillspec.matching import PhraseIndex

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any, Final

try:  # the C string encoder json.dumps uses (no ASCII escaping), without importing json
    from _json import encode_basestring as _enc
except ImportError:  # pragma: no cover - every CPython has _json
    from json.encoder import encode_basestring as _enc


def _enc_opt(value: str | None) -> str:
    return "null" if value is None else _enc(value)


class MatchedRule(Record):
    """A matched rule as a decision lists it: id and reason (``json``: the entry pre-encoded)."""

    __slots__ = ("id", "json", "reason")
    __match_args__ = ("id", "reason")

    def __init__(self, id: str, reason: str | None, json: str = "") -> None:
        self.id: Final = id
        self.reason: Final = reason
        #: this entry already encoded as JSON (filled once per rule at compile time);
        #: not a field: equality, hash and repr ignore it
        self.json: Final = json


class CompiledRule(Record):
    """One rule with its phrases normalized and indexed, plus its effects."""

    __slots__ = (
        "after_success",
        "allow",
        "any_ids",
        "any_phrases",
        "booleans",
        "elicit",
        "forbid",
        "group_ids",
        "groups",
        "has_condition",
        "id",
        "index",
        "line",
        "prefer",
        "reason",
        "route_order",
    )
    __match_args__ = (
        "index",
        "id",
        "any_phrases",
        "any_ids",
        "groups",
        "group_ids",
        "booleans",
        "has_condition",
        "prefer",
        "route_order",
        "forbid",
        "allow",
        "elicit",
        "after_success",
        "reason",
        "line",
    )

    def __init__(
        self,
        index: int,
        id: str,
        any_phrases: tuple[str, ...],  # raw, as written
        any_ids: frozenset[int],  # ids in the spec's PhraseIndex ('' phrases dropped)
        groups: tuple[tuple[str, ...], ...],
        group_ids: tuple[frozenset[int], ...],
        booleans: tuple[tuple[str, bool], ...],
        has_condition: bool,
        prefer: str | None,
        route_order: tuple[str, ...],
        forbid: tuple[str, ...],
        allow: tuple[tuple[str, Any], ...],
        elicit: tuple[str, ...],
        after_success: tuple[str, ...],
        reason: str | None,
        line: int = 0,
    ) -> None:
        self.index: Final = index
        self.id: Final = id
        self.any_phrases: Final = any_phrases
        self.any_ids: Final = any_ids
        self.groups: Final = groups
        self.group_ids: Final = group_ids
        self.booleans: Final = booleans
        self.has_condition: Final = has_condition
        self.prefer: Final = prefer
        self.route_order: Final = route_order
        self.forbid: Final = forbid
        self.allow: Final = allow
        self.elicit: Final = elicit
        self.after_success: Final = after_success
        self.reason: Final = reason
        self.line: Final = line

    @property
    def entry(self) -> MatchedRule:
        encoded = f'{{"id": {_enc(self.id)}, "reason": {_enc_opt(self.reason)}}}'
        return MatchedRule(self.id, self.reason, encoded)

    @property
    def only_any(self) -> bool:
        """Only ``user_says_any``: being touched by a found phrase means it matches."""
        return bool(self.any_ids) and not self.groups and not self.booleans

    @property
    def uses_phrases(self) -> bool:
        return bool(self.any_phrases or self.groups)


class RoutePlan(Record):
    """A route's execution plan as tests see it: phase ids and ``phase:when->to_phase`` jumps."""

    __slots__ = ("jumps", "phases")
    __match_args__ = ("phases", "jumps")

    def __init__(self, phases: tuple[str, ...], jumps: tuple[str, ...]) -> None:
        self.phases: Final = phases
        self.jumps: Final = jumps  # "phase:when->to_phase"


class CompiledSpec(Record):
    """A spec prepared for deciding: built once, shared read-only.

    The fields after ``tests`` are the phrase index and lookup tables decide
    runs on; like a dataclass's ``compare=False`` fields they are left out of
    equality, hash and repr.
    """

    __slots__ = (
        "_batch",
        "always_eval",
        "bool_ids",
        "default_route_order",
        "entries",
        "index",
        "only_any",
        "phrase_rules",
        "plans",
        "route_checks",
        "routes",
        "rules",
        "schema",
        "skill_id",
        "tests",
        "trace_record",
        "trace_required",
    )
    __match_args__ = (
        "skill_id",
        "schema",
        "routes",
        "default_route_order",
        "rules",
        "plans",
        "route_checks",
        "trace_required",
        "trace_record",
        "tests",
    )

    def __init__(
        self,
        skill_id: str,
        schema: str,
        routes: tuple[str, ...],  # file order
        default_route_order: tuple[str, ...],
        rules: tuple[CompiledRule, ...],
        plans: Mapping[str, RoutePlan],
        route_checks: Mapping[str, tuple[str, ...]],
        trace_required: bool,
        trace_record: tuple[str, ...],
        tests: tuple[Mapping[str, Any], ...],
        index: PhraseIndex,
        phrase_rules: Mapping[int, tuple[int, ...]],
        always_eval: frozenset[int],
        bool_ids: Mapping[str, frozenset[int]],
        only_any: frozenset[int],
        entries: tuple[MatchedRule, ...],
    ) -> None:
        self.skill_id: Final = skill_id
        self.schema: Final = schema
        self.routes: Final = routes
        self.default_route_order: Final = default_route_order
        self.rules: Final = rules
        self.plans: Final = plans
        self.route_checks: Final = route_checks
        self.trace_required: Final = trace_required
        self.trace_record: Final = trace_record
        self.tests: Final = tests
        self.index: Final = index
        self.phrase_rules: Final = phrase_rules
        self.always_eval: Final = always_eval
        self.bool_ids: Final = bool_ids
        self.only_any: Final = only_any
        self.entries: Final = entries
        #: The batch encoder's tables (engine.skillspec.batch), built on first use.
        self._batch: object | None = None

    def __hash__(self) -> int:  # its mappings are unhashable, as a dataclass with them is
        raise TypeError(f"unhashable type: {type(self).__qualname__!r}")


class RouteSelection(Record):
    """Which route a decision chose, on what basis, and the rule (if any) that chose it."""

    __slots__ = ("basis", "reason", "route", "rule_id")
    __match_args__ = ("route", "basis", "rule_id", "reason")

    def __init__(self, route: str, basis: str, rule_id: str | None, reason: str | None) -> None:
        self.route: Final = route
        self.basis: Final = basis
        self.rule_id: Final = rule_id
        self.reason: Final = reason

    def to_json(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "basis": self.basis,
            "rule_id": self.rule_id,
            "reason": self.reason,
        }


class TraceEvent(Record):
    """One decision event as the reference names it (``event``) with its payload."""

    __slots__ = ("data", "event")
    __match_args__ = ("event", "data")

    def __init__(self, event: str, data: Mapping[str, Any]) -> None:
        self.event: Final = event
        self.data: Final = data


class Decision(Record):
    """The outcome of deciding one input: route, order, effects, matched rules, reason."""

    __slots__ = (
        "after_success",
        "allow",
        "elicit",
        "events",
        "forbid",
        "input",
        "matched_rules",
        "plan",
        "reason",
        "route",
        "route_order",
        "route_selection",
    )
    __match_args__ = (
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
        "plan",
        "events",
    )

    def __init__(
        self,
        input: str,
        route: str | None,
        route_selection: RouteSelection | None,
        route_order: tuple[str, ...],
        forbid: tuple[str, ...],
        allow: Mapping[str, Any],
        elicit: tuple[str, ...],
        after_success: tuple[str, ...],
        matched_rules: tuple[MatchedRule, ...],
        reason: str | None,
        plan: RoutePlan | None = None,
        events: tuple[TraceEvent, ...] = (),
    ) -> None:
        self.input: Final = input
        self.route: Final = route
        self.route_selection: Final = route_selection
        self.route_order: Final = route_order
        self.forbid: Final = forbid
        self.allow: Final = allow
        self.elicit: Final = elicit
        self.after_success: Final = after_success
        self.matched_rules: Final = matched_rules
        self.reason: Final = reason
        self.plan: Final = plan
        self.events: Final = events

    @property
    def matched_rule_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.matched_rules)

    def to_json(self) -> dict[str, Any]:
        """Exactly the pinned keys of ``skillspec decide --json``."""
        return {
            "input": self.input,
            "route": self.route,
            "route_selection": None
            if self.route_selection is None
            else self.route_selection.to_json(),
            "route_order": list(self.route_order),
            "forbid": list(self.forbid),
            "allow": dict(self.allow),
            "elicit": list(self.elicit),
            "after_success": list(self.after_success),
            "matched_rules": [{"id": m.id, "reason": m.reason} for m in self.matched_rules],
            "reason": self.reason,
        }
