"""Every scenario test of the reference corpus: our pass/fail equals the reference's.

EXPECTED.json records, per spec, whether each scenario test passes under the
reference. Tests ran on the fully validated spec ("full"), after structural
checks only ("unresolved"), or not at all (null, when the spec cannot load);
the null ones are skipped with that reason. The spec is parsed with the strict
YAML loader and compiled; validation verdicts are another test's concern.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.skillspec.decide import compile_spec, decision_json_line
from engine.skillspec.scenarios import compare_expectation, run_tests
from engine.skillspec.spec_explain import explain
from engine.yamlsrc import load_yaml_file
from tests.conftest import REFERENCE

EXPECTED_PATH = REFERENCE / "EXPECTED.json"


def _cases() -> list[Any]:
    if not EXPECTED_PATH.is_file():
        return [
            pytest.param(
                None,
                None,
                None,
                marks=pytest.mark.skip(reason=f"conformance corpus absent: {EXPECTED_PATH}"),
            )
        ]
    expected = json.loads(EXPECTED_PATH.read_text(encoding="utf-8"))
    cases = []
    for spec, entry in expected["specs"].items():
        for n, test in enumerate(entry["tests"]):
            marks = []
            if test["passes"] is None:
                marks.append(
                    pytest.mark.skip(
                        reason=f"reference did not run tests: spec fails to load "
                        f"({(entry['validate_unresolved'].get('error') or '')[:120]})"
                    )
                )
            cases.append(pytest.param(spec, n, test, marks=marks, id=f"{spec}::{n}"))
    return cases


_COMPILED: dict[str, Any] = {}


def _compiled(spec: str) -> Any:
    if spec not in _COMPILED:
        _COMPILED[spec] = compile_spec(load_yaml_file(REFERENCE / spec).data)
    return _COMPILED[spec]


@pytest.mark.parametrize(("spec", "index", "expected"), _cases())
def test_scenario_verdict_matches_reference(spec: str, index: int, expected: Any) -> None:
    compiled = _compiled(spec)
    run = run_tests(compiled)
    result = run.results[index]
    assert result.name == expected["name"]
    assert result.passed is expected["passes"], [f.message for f in result.failures]
    # explain must tell the same story as decide for every corpus input
    exp = explain(compiled, result.input)
    assert tuple(r.id for r in exp.rules if r.matched) == result.decision.matched_rule_ids
    # the batch encoder writes exactly what json.dumps would
    line = decision_json_line(result.decision)
    assert line == json.dumps(result.decision.to_json(), ensure_ascii=False)


def result_index(run: Any, result: Any) -> int:
    return next(i for i, r in enumerate(run.results) if r is result)


def test_report_count(capsys: pytest.CaptureFixture[str]) -> None:
    if not EXPECTED_PATH.is_file():
        pytest.skip(f"conformance corpus absent: {EXPECTED_PATH}")
    expected = json.loads(EXPECTED_PATH.read_text(encoding="utf-8"))
    agree = total = skipped = 0
    for spec, entry in expected["specs"].items():
        if entry["tests_run_with"] is None:
            skipped += len(entry["tests"])
            continue
        run = run_tests(_compiled(spec))
        for result, test in zip(run.results, entry["tests"], strict=True):
            total += 1
            agree += result.passed is test["passes"]
            # a corrupted expectation must be caught by the same comparison
            raw = _compiled(spec).tests[result_index(run, result)]["expect"]
            broken = {**raw, "matched_rules": [*raw.get("matched_rules", []), "no_such_rule"]}
            assert [f.expectation for f in compare_expectation(result.decision, broken)] == [
                "matched_rules"
            ]
    with capsys.disabled():
        print(
            f"\nconformance: {agree}/{total} scenario tests agree with the reference "
            f"({skipped} skipped: spec does not load)"
        )
    assert agree == total and total > 200


def _specs() -> list[Any]:
    if not EXPECTED_PATH.is_file():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="corpus absent"))]
    expected = json.loads(EXPECTED_PATH.read_text(encoding="utf-8"))
    return [
        pytest.param(spec, e["tests_run_with"], id=spec) for spec, e in expected["specs"].items()
    ]


@pytest.mark.parametrize(("spec", "run_with"), _specs())
def test_skillspec_test_command_runs_or_refuses_like_the_reference(
    spec: str, run_with: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fully valid specs run (all reference tests pass: exit 0); the others are refused.

    The reference's ``test`` loads with file checks, so a spec whose only
    problem is a missing file is refused too (EXPECTED's "unresolved" verdicts
    were computed in-process, not by the CLI).
    """
    from engine.cli.skillspec import main

    code = main(["test", str(REFERENCE / spec)])
    out, err = capsys.readouterr()
    if run_with == "full":
        assert code == 0, err
        assert " 0 failed" in out
    else:
        assert code == 1, out
        assert "does not validate" in err
