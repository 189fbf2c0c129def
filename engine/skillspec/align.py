"""``trace align``: is a recorded decision reproducible from the current spec?

Following the reference's ``spec/trace.md``, alignment re-runs the spec on
the input captured in the trace and compares deterministic facts (skill id,
schema, spec fingerprint, input hash, route, route-selection basis, matched
rules, forbids, elicitations, after-success closures). Whether the harness then
*did* what the decision asked (took the route, honoured forbids, asked the
questions, ran the closures) cannot be proven from a decision trace, so those
execution obligations are always reported as ``unproven``. A fact the trace
did not record is ``unproven`` too, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.skillspec.decide import CompiledSpec, Decision, decide
from engine.skillspec.trace import compact, input_sha256, read_envelopes

ALIGN_SCHEMA = "skillspec.align/v0"
PASS, FAIL, UNPROVEN = "pass", "fail", "unproven"


@dataclass(frozen=True, slots=True)
class AlignCheck:
    id: str
    status: str
    message: str
    expected: Any = None
    actual: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "message": self.message,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True, slots=True)
class Obligation:
    id: str
    kind: str  # route | route_check | forbid | elicitation | after_success
    source: str
    message: str
    status: str = UNPROVEN

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "source": self.source,
            "message": self.message,
        }


@dataclass(frozen=True)
class AlignReport:
    spec: str
    decision_trace: str
    input: str
    decision: Decision
    checks: tuple[AlignCheck, ...]
    obligations: tuple[Obligation, ...]

    @property
    def status(self) -> str:
        states = {c.status for c in self.checks} | {o.status for o in self.obligations}
        if FAIL in states:
            return FAIL
        return UNPROVEN if UNPROVEN in states else PASS

    @property
    def ok(self) -> bool:
        """No deterministic check failed (unproven obligations do not make it fail)."""
        return self.status != FAIL

    def counts(self, items: Sequence[AlignCheck | Obligation]) -> dict[str, int]:
        return {
            "total": len(items),
            "pass": sum(1 for i in items if i.status == PASS),
            "fail": sum(1 for i in items if i.status == FAIL),
            "unproven": sum(1 for i in items if i.status == UNPROVEN),
        }

    def to_json(self) -> dict[str, Any]:
        sel = self.decision.route_selection
        kinds: dict[str, int] = {}
        for o in self.obligations:
            if o.status == UNPROVEN:
                kinds[o.kind] = kinds.get(o.kind, 0) + 1
        return {
            "schema": ALIGN_SCHEMA,
            "ok": self.ok,
            "status": self.status,
            "summary": {
                "selected_route": self.decision.route,
                "route_selection_basis": sel.basis if sel else None,
                "route_selection_rule": sel.rule_id if sel else None,
                "matched_rules": list(self.decision.matched_rule_ids),
                "decision_checks": self.counts(self.checks),
                "execution_obligations": self.counts(self.obligations),
                "unproven_obligation_kinds": kinds,
            },
            "spec": self.spec,
            "decision_trace": self.decision_trace,
            "input": self.input,
            "checks": [c.to_json() for c in self.checks],
            "obligations": [o.to_json() for o in self.obligations],
        }


def _eq(cid: str, message: str, expected: Any, actual: Any) -> AlignCheck:
    return AlignCheck(cid, PASS if expected == actual else FAIL, message, expected, actual)


def _optional_eq(cid: str, message: str, expected: Any, actual: Any | None) -> AlignCheck:
    if actual is None:
        return AlignCheck(cid, UNPROVEN, f"{message}; the trace did not record it", expected)
    return _eq(cid, message, expected, actual)


def _last(envelopes: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    for env in reversed(envelopes):
        if env["event"] == kind:
            data: Mapping[str, Any] = env["data"]
            return data
    return None


def _collected(envelopes: Sequence[Mapping[str, Any]], kind: str, key: str) -> list[str] | None:
    seen = False
    values: list[str] = []
    for env in envelopes:
        if env["event"] != kind:
            continue
        seen = True
        items = env["data"].get(key)
        if isinstance(items, list):
            values.extend(v for v in items if isinstance(v, str))
    return values if seen else None


def _set_check(
    cid: str, message: str, expected: Sequence[str], actual: list[str] | None
) -> AlignCheck:
    want = sorted(set(expected))
    if actual is None:
        if not want:
            return AlignCheck(cid, PASS, f"{message}; none were expected", [], None)
        return AlignCheck(
            cid, UNPROVEN, f"{message}; the trace did not record this event kind", want
        )
    return _eq(cid, message, want, sorted(set(actual)))


def _selection_of(
    outcome: Mapping[str, Any] | None, envelopes: Sequence[Mapping[str, Any]]
) -> Any | None:
    if outcome is not None and "route_selection" in outcome:
        return outcome["route_selection"]
    data = _last(envelopes, "route_selected")
    if data is None or "basis" not in data:
        return None
    return {k: data[k] for k in ("route", "basis", "rule_id", "reason") if k in data}


def obligations_for(compiled: CompiledSpec, decision: Decision) -> list[Obligation]:
    """What execution must prove for this decision; all unproven from a decision trace."""
    out: list[Obligation] = []
    if decision.route is not None:
        out.append(
            Obligation(
                decision.route,
                "route",
                "decision.route",
                "the selected route needs execution evidence of fulfilment",
            )
        )
        for check in compiled.route_checks.get(decision.route, ()):
            out.append(
                Obligation(
                    check,
                    "route_check",
                    f"routes.{decision.route}.checks",
                    "the route check needs execution evidence",
                )
            )
    for item in decision.forbid:
        out.append(
            Obligation(
                item,
                "forbid",
                "decision.forbid",
                "needs execution evidence that the substitution never happened",
            )
        )
    for item in decision.elicit:
        out.append(
            Obligation(
                item,
                "elicitation",
                "decision.elicit",
                "needs evidence the question was answered or waived",
            )
        )
    for item in decision.after_success:
        out.append(
            Obligation(
                item, "after_success", "decision.after_success", "needs evidence the closure ran"
            )
        )
    return out


def align(
    compiled: CompiledSpec,
    spec_path: str,
    spec_fingerprint: str | None,
    run_dir: Path | str,
) -> AlignReport:
    """Compact the run, re-decide its input, compare facts, write ``alignment.json``."""
    run_dir = Path(run_dir)
    compact(run_dir)
    envelopes = read_envelopes(run_dir)
    text = _captured_input(run_dir, envelopes)
    decision = decide(compiled, text)
    report = AlignReport(
        spec=spec_path,
        decision_trace=str(run_dir),
        input=text,
        decision=decision,
        checks=_checks(compiled, spec_fingerprint, text, decision, envelopes),
        obligations=tuple(obligations_for(compiled, decision)),
    )
    try:
        (run_dir / "alignment.json").write_text(
            json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str),
            encoding="utf-8",
        )
    except OSError as exc:
        raise InputError(f"cannot write {run_dir / 'alignment.json'}: {exc}") from exc
    return report


def _captured_input(run_dir: Path, envelopes: Sequence[Mapping[str, Any]]) -> str:
    """The input the trace captured; InputError for a trace without one."""
    if not envelopes:
        raise InputError(f"decision trace {run_dir} has no events", title="Bad trace")
    received = _last(envelopes, "input_received")
    text = received.get("input") if received is not None else None
    if not isinstance(text, str):
        raise InputError(
            f"decision trace {run_dir} has no input_received event with an input "
            "(trace.record must include input_received for alignment)",
            title="Bad trace",
        )
    return text


def _checks(
    compiled: CompiledSpec,
    spec_fingerprint: str | None,
    text: str,
    decision: Decision,
    envelopes: Sequence[Mapping[str, Any]],
) -> tuple[AlignCheck, ...]:
    """Each deterministic fact of the trace against the current spec and a fresh decision."""
    first = envelopes[0]
    outcome = _last(envelopes, "outcome_recorded")
    trace_route = outcome.get("route") if outcome is not None else None
    if outcome is None:
        routed = _last(envelopes, "route_selected")
        trace_route = routed.get("route") if routed is not None else None
    fp = next((e["spec_fingerprint"] for e in envelopes if e.get("spec_fingerprint")), None)
    ih = next((e["input_sha256"] for e in envelopes if e.get("input_sha256")), None)
    sel = decision.route_selection
    return (
        _eq(
            "skill_id",
            "trace skill id matches the current spec",
            compiled.skill_id,
            first.get("skill_id"),
        ),
        _eq(
            "spec_schema",
            "trace spec schema matches the current spec",
            compiled.schema,
            first.get("spec_schema"),
        ),
        _optional_eq(
            "spec_fingerprint",
            "trace spec fingerprint matches the current spec graph",
            spec_fingerprint,
            fp,
        ),
        _optional_eq(
            "input_sha256", "trace input hash matches the captured input", input_sha256(text), ih
        ),
        _eq(
            "route_selected",
            "re-deciding the captured input selects the same route",
            decision.route,
            trace_route,
        ),
        _optional_eq(
            "route_selection_basis",
            "trace records the same route-selection basis",
            None if sel is None else sel.to_json(),
            _selection_of(outcome, envelopes),
        ),
        _eq(
            "matched_rules",
            "re-deciding the captured input matches the same rules",
            list(decision.matched_rule_ids),
            outcome.get("matched_rules") if outcome is not None else None,
        ),
        _set_check(
            "forbids",
            "trace records the same forbidden substitutions",
            decision.forbid,
            _collected(envelopes, "forbid_added", "forbid"),
        ),
        _set_check(
            "elicitations",
            "trace records the same elicitations",
            decision.elicit,
            _collected(envelopes, "elicitation_requested", "elicit"),
        ),
        _set_check(
            "after_success",
            "trace records the same after-success closures",
            decision.after_success,
            _collected(envelopes, "after_success_scheduled", "after_success"),
        ),
    )


def render_summary(report: AlignReport) -> str:
    data = report.to_json()["summary"]
    dc, eo = data["decision_checks"], data["execution_obligations"]
    kinds = ", ".join(f"{k} {n}" for k, n in data["unproven_obligation_kinds"].items()) or "none"
    return "\n".join(
        [
            f"alignment: {report.status}",
            f"route: {report.decision.route or '<none>'} (basis {data['route_selection_basis']}, "
            f"rule {data['route_selection_rule'] or '-'})",
            f"matched rules: {', '.join(data['matched_rules']) or 'none'}",
            f"decision checks: {dc['pass']} pass, {dc['fail']} fail, {dc['unproven']} unproven "
            f"of {dc['total']}",
            f"execution obligations: {eo['unproven']} unproven of {eo['total']} "
            "(a decision trace cannot prove execution)",
            f"unproven obligation kinds: {kinds}",
        ]
    )


def render_report(report: AlignReport) -> str:
    lines = [render_summary(report), "checks:"]
    for c in report.checks:
        extra = ""
        if c.status == FAIL:
            extra = f" (expected {c.expected!r}, trace has {c.actual!r})"
        lines.append(f"  {c.status:<8} {c.id}: {c.message}{extra}")
    if report.obligations:
        lines.append("obligations:")
        for o in report.obligations:
            lines.append(f"  {o.status:<8} {o.kind} {o.id}: {o.message}")
    return "\n".join(lines)
