"""Scenario tests (``skillspec test``) and their coverage report.

Every test's input goes through the same :func:`decide` as ``skillspec
decide``, and its ``expect`` block is compared the way the reference does:
plain lists assert inclusion, ``*_exact`` assert exact sets, ``not_*`` assert
absence, ``route`` is an equality, ``route_order`` and ``plan_phases`` are
exact sequences, ``plan_jumps`` entries must each appear. Each failure names
the expectation with what was expected and what was got, so a report reads
without the spec open.

Coverage exists because the seeds ask for a scenario test on every
route-changing, forbid-heavy or elicitation-producing rule: it lists rules no
test matches and routes no test selects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.record import Record
from engine.skillspec.decide import CompiledSpec, Decision, decide

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any, Final

_LIST_KEYS = ("forbid", "elicit", "after_success", "matched_rules")


class Failure(Record):
    """One unmet expectation: which key, what the test wanted, what decide gave."""

    __slots__ = ("expectation", "expected", "got", "message")
    __match_args__ = ("expectation", "expected", "got", "message")

    def __init__(self, expectation: str, expected: Any, got: Any, message: str) -> None:
        self.expectation: Final = expectation
        self.expected: Final = expected
        self.got: Final = got
        self.message: Final = message

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "expected": self.expected,
            "got": self.got,
            "message": self.message,
        }


class TestResult(Record):
    """One scenario test run: its name and input, what failed, the decision it got."""

    __slots__ = ("decision", "failures", "input", "line", "name")
    __match_args__ = ("name", "input", "failures", "decision", "line")

    def __init__(
        self,
        name: str,
        input: str,
        failures: tuple[Failure, ...],
        decision: Decision,
        line: int = 0,
    ) -> None:
        self.name: Final = name
        self.input: Final = input
        self.failures: Final = failures
        self.decision: Final = decision
        self.line: Final = line

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "input": self.input,
            "passed": self.passed,
            "failures": [f.to_json() for f in self.failures],
            "decision": self.decision.to_json(),
        }


class TestRun(Record):
    """Every scenario test of a spec, in file order."""

    __slots__ = ("results",)
    __match_args__ = ("results",)

    def __init__(self, results: tuple[TestResult, ...]) -> None:
        self.results: Final = results

    @property
    def passed(self) -> tuple[TestResult, ...]:
        return tuple(r for r in self.results if r.passed)

    @property
    def failed(self) -> tuple[TestResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "passed": len(self.passed),
            "failed": len(self.failed),
            "tests": [r.to_json() for r in self.results],
        }


def _strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def _actual(decision: Decision, key: str) -> list[str]:
    if key == "matched_rules":
        return list(decision.matched_rule_ids)
    values: Sequence[str] = getattr(decision, key)
    return list(values)


def compare_expectation(decision: Decision, expect: Mapping[str, Any]) -> list[Failure]:
    """The reference's checks, in its order, each failure with expected vs got."""
    out: list[Failure] = []
    route = expect.get("route")
    if route is not None and decision.route != route:
        out.append(
            Failure(
                "route",
                route,
                decision.route,
                f"expected route {route}, got {decision.route or '<none>'}",
            )
        )
    order = _strings(expect.get("route_order"))
    if order and list(decision.route_order) != order:
        out.append(
            Failure(
                "route_order",
                order,
                list(decision.route_order),
                f"expected route_order {order}, got {list(decision.route_order)}",
            )
        )
    plan = decision.plan
    phases = _strings(expect.get("plan_phases"))
    got_phases = list(plan.phases) if plan else []
    if phases and phases != got_phases:
        out.append(
            Failure(
                "plan_phases",
                phases,
                got_phases,
                f"expected plan_phases {phases}, got {got_phases}",
            )
        )
    got_jumps = list(plan.jumps) if plan else []
    for jump in _strings(expect.get("plan_jumps")):
        if jump not in got_jumps:
            out.append(
                Failure(
                    "plan_jumps", jump, got_jumps, f"expected plan_jump {jump!r}, got {got_jumps}"
                )
            )
    for key in _LIST_KEYS:
        actual = _actual(decision, key)
        for item in _strings(expect.get(key)):
            if item not in actual:
                out.append(
                    Failure(key, item, actual, f"expected {key} to include {item!r}, got {actual}")
                )
        exact = expect.get(f"{key}_exact")
        if isinstance(exact, list):
            want = sorted(set(_strings(exact)))
            have = sorted(set(actual))
            if want != have:
                out.append(
                    Failure(f"{key}_exact", want, have, f"expected {key}_exact {want}, got {have}")
                )
        for item in _strings(expect.get(f"not_{key}")):
            if item in actual:
                out.append(
                    Failure(
                        f"not_{key}",
                        item,
                        actual,
                        f"expected {key} not to contain {item!r}, got {actual}",
                    )
                )
    return out


def _line(node: Any) -> int:
    pos = getattr(node, "pos", None)
    return int(getattr(pos, "line", 0) or 0)


def run_tests(compiled: CompiledSpec) -> TestRun:
    """Run every scenario test of the spec, in file order."""
    results = []
    for test in compiled.tests:
        text = str(test.get("input", ""))
        decision = decide(compiled, text)
        expect = test.get("expect")
        failures = compare_expectation(decision, expect if isinstance(expect, Mapping) else {})
        results.append(
            TestResult(str(test.get("name", "")), text, tuple(failures), decision, _line(test))
        )
    return TestRun(tuple(results))


class Coverage(Record):
    """Which rules no scenario test matches and which routes no test selects."""

    __slots__ = (
        "routes_total",
        "routes_unselected",
        "rules_total",
        "rules_uncovered",
        "rules_uncovered_obligated",
    )
    __match_args__ = (
        "rules_total",
        "rules_uncovered",
        "rules_uncovered_obligated",
        "routes_total",
        "routes_unselected",
    )

    def __init__(
        self,
        rules_total: int,
        rules_uncovered: tuple[str, ...],
        rules_uncovered_obligated: tuple[str, ...],  # route-changing, forbid or elicit rules
        routes_total: int,
        routes_unselected: tuple[str, ...],
    ) -> None:
        self.rules_total: Final = rules_total
        self.rules_uncovered: Final = rules_uncovered
        self.rules_uncovered_obligated: Final = rules_uncovered_obligated
        self.routes_total: Final = routes_total
        self.routes_unselected: Final = routes_unselected

    @property
    def complete(self) -> bool:
        return not self.rules_uncovered and not self.routes_unselected

    def to_json(self) -> dict[str, Any]:
        return {
            "rules_total": self.rules_total,
            "rules_uncovered": list(self.rules_uncovered),
            "rules_uncovered_obligated": list(self.rules_uncovered_obligated),
            "routes_total": self.routes_total,
            "routes_unselected": list(self.routes_unselected),
            "complete": self.complete,
        }


def coverage(compiled: CompiledSpec, run: TestRun) -> Coverage:
    matched = {rid for r in run.results for rid in r.decision.matched_rule_ids}
    selected = {r.decision.route for r in run.results}
    uncovered = [rule for rule in compiled.rules if rule.id not in matched]
    obligated = [
        rule.id
        for rule in uncovered
        if rule.prefer or rule.route_order or rule.forbid or rule.elicit
    ]
    return Coverage(
        rules_total=len(compiled.rules),
        rules_uncovered=tuple(dict.fromkeys(rule.id for rule in uncovered)),
        rules_uncovered_obligated=tuple(dict.fromkeys(obligated)),
        routes_total=len(compiled.routes),
        routes_unselected=tuple(r for r in dict.fromkeys(compiled.routes) if r not in selected),
    )


def render_run(run: TestRun, spec_label: str) -> str:
    """The human report: one line per test, failures indented under it."""
    lines = []
    for result in run.results:
        mark = "ok  " if result.passed else "FAIL"
        lines.append(f"{mark} {result.name}")
        if not result.passed:
            lines.append(f"     input: {result.input!r}")
            for failure in result.failures:
                lines.append(f"     - {failure.expectation}: {failure.message}")
    lines.append(
        f"{spec_label}: {len(run.passed)} passed, {len(run.failed)} failed, "
        f"{len(run.results)} total"
    )
    return "\n".join(lines)


def render_coverage(cov: Coverage) -> str:
    lines = [
        f"coverage: {cov.rules_total - len(cov.rules_uncovered)}/{cov.rules_total} rules matched "
        f"by a test, {cov.routes_total - len(cov.routes_unselected)}/{cov.routes_total} routes "
        "selected by a test"
    ]
    for rid in cov.rules_uncovered:
        tag = (
            " (route-changing, forbid or elicit: should have a test)"
            if (rid in cov.rules_uncovered_obligated)
            else ""
        )
        lines.append(f"  rule not matched by any test: {rid}{tag}")
    for route in cov.routes_unselected:
        lines.append(f"  route not selected by any test: {route}")
    return "\n".join(lines)
