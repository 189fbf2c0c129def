"""Cross-reference rules: each reported with location and dotted path, all collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.skillspec.load import SpecReport, check_spec
from engine.skillspec.refwalk import is_identifier
from engine.skillspec.validate import has_assertions
from tests.skillspec.fixtures.cases import spec


def run(tmp_path: Path, body: str, resolve: bool = True, **files: str) -> SpecReport:
    for rel, content in files.items():
        (tmp_path / rel).write_text(content)
    path = tmp_path / "skill.spec.yml"
    path.write_text(spec(body))
    return check_spec(path, resolve_files=resolve)


def messages(report: SpecReport) -> list[str]:
    return [d.message for d in report.errors]


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a", True),
        ("a.b-c_9", True),
        ("", False),
        ("9a", False),
        ("A", False),
        ("aB", False),
        ("a b", False),
        ("é", False),
        ("_a", False),
    ],
)
def test_identifier_rule(value: str, ok: bool) -> None:
    assert is_identifier(value) is ok


def test_every_reference_error_is_collected_with_its_path(tmp_path: Path) -> None:
    body = (
        "rules:\n"
        "  - id: r1\n    prefer: nowhere\n    elicit: [ghost]\n"
        "  - id: r2\n    route_order: [local, void]\n"
        "tests:\n  - name: t\n    input: x\n    expect:\n      route: lost\n"
    )
    report = run(tmp_path, body)
    paths = {d.path: d.message for d in report.errors}
    assert paths == {
        "rules[0].prefer": 'unknown reference "nowhere" in rules.prefer',
        "rules[0].elicit[0]": 'unknown reference "ghost" in rules.elicit',
        "rules[1].route_order[1]": 'unknown reference "void" in rules.route_order',
        "tests[0].expect.route": 'unknown reference "lost" in tests.expect.route',
    }
    assert not report.structural_ok


def test_import_cycle_matches_reference_wording_and_shows_the_cycle(tmp_path: Path) -> None:
    body = (
        "imports:\n"
        "  a: {path: a.md, role: reference, requires: {imports: [b]}}\n"
        "  b: {path: b.md, role: reference, requires: {imports: [c]}}\n"
        "  c: {path: c.md, role: reference, requires: {imports: [a]}}\n"
    )
    report = run(tmp_path, body, resolve=False)
    (diag,) = report.errors
    assert diag.message == 'unknown reference "a" in imports.requires.imports.cycle'
    assert diag.hint == "import cycle: a -> b -> c -> a"
    assert diag.location.line == 11


def test_self_import_is_a_cycle(tmp_path: Path) -> None:
    body = "imports:\n  a: {path: a.md, role: policy, load: always, requires: {imports: [a]}}\n"
    assert "imports.requires.imports.cycle" in messages(run(tmp_path, body, resolve=False))[0]


def test_orphans_follow_reference_reachability(tmp_path: Path) -> None:
    body = (
        "imports:\n"
        "  base: {path: a.md, role: reference}\n"  # required by child: not an orphan
        "  child: {path: a.md, role: reference, used_by: [{kind: route, id: local}],"
        " requires: {imports: [base]}}\n"
        "  lonely: {path: a.md, role: reference}\n"
        "resources:\n"
        "  used: {path: a.md, role: reference}\n"
        "  unused: {path: a.md, role: reference}\n"
        "code:\n"
        "  c: {language: sh, kind: example, source: {inline: x}, requires: {resources: [used]}}\n"
    )
    report = run(tmp_path, body, resolve=False)
    assert sorted(messages(report)) == [
        'unknown reference "lonely" in imports.orphan',
        'unknown reference "unused" in resources.orphan',
    ]


def test_after_success_and_states_do_accept_any_action_kind(tmp_path: Path) -> None:
    body = (
        "commands:\n  cmd: {template: make}\n"
        "recipes:\n  rec: {}\n"
        "code:\n  cod: {language: sh, kind: example, source: {inline: x}}\n"
        "closures:\n  clo: anything\n"
        "rules:\n  - id: r1\n    after_success: [cmd, rec, cod, clo]\n"
        "states:\n  s:\n    do: [cmd, rec, cod, clo, nope]\n"
    )
    assert messages(run(tmp_path, body, resolve=False)) == ['unknown reference "nope" in states.do']


def test_code_provenance_needs_exactly_one_known_origin(tmp_path: Path) -> None:
    base = "code:\n  c:\n    language: sh\n    kind: example\n    source: {inline: x}\n"
    none = run(tmp_path, base + "    provenance: {heading: H}\n", resolve=False)
    assert messages(none) == ["spec is missing required field code.provenance.resource_or_import"]
    unknown = run(tmp_path, base + "    provenance: {import: ghost}\n", resolve=False)
    assert messages(unknown) == ['unknown reference "ghost" in code.provenance.import']


def test_recipe_steps_and_branch_targets(tmp_path: Path) -> None:
    body = (
        "commands:\n  build: {template: make}\n"
        "recipes:\n  main:\n    requires: {artifacts: [nothing]}\n    steps:\n"
        "      - run_command: build\n      - ask: nobody\n"
        "      - branch: {if: ' ', then: build, otherwise: elsewhere}\n"
    )
    assert sorted(messages(run(tmp_path, body, resolve=False))) == sorted(
        [
            'unknown reference "elsewhere" in recipes.steps.branch.otherwise',
            'unknown reference "nobody" in recipes.steps.ask',
            'unknown reference "nothing" in recipes.requires.artifacts',
            "spec is missing required field recipes.steps.branch.if",
        ]
    )


def test_phase_references_are_warnings_not_errors(tmp_path: Path) -> None:
    body = (
        "  - id: planned\n    label: P\n    execution_plan:\n      phases:\n"
        "        - id: one\n          owner_skill: me\n          route: ghost\n"
        "          jumps: [{when: fails, to_phase: two}]\n"
    )
    report = run(tmp_path, body, resolve=False)
    assert report.ok
    warned = [d.message for d in report.warnings]
    assert any('"ghost"' in w for w in warned)
    assert any('"two"' in w for w in warned)


def test_expectations_need_an_assertion() -> None:
    assert not has_assertions({})
    assert not has_assertions({"forbid": [], "route": None, "elicit_exact": None})
    assert has_assertions({"elicit_exact": []})
    assert has_assertions({"not_forbid": ["x"]})


def test_code_file_must_match_its_resource_path(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text("echo a")
    (tmp_path / "b.sh").write_text("echo b")
    body = (
        "resources:\n  script: {path: a.sh, role: script}\n"
        "code:\n  c:\n    language: sh\n    kind: example\n"
        "    source: {file: b.sh, from_resource: script}\n"
    )
    report = run(tmp_path, body)
    assert report.structural_ok and not report.files_ok
    assert messages(report) == ['resource "script" path a.sh does not match code file b.sh']


def test_empty_deps_ledger_fails_file_check(tmp_path: Path) -> None:
    body = "dependencies:\n  ledger: {kind: file, path: deps.toml}\n"
    report = run(tmp_path, body, **{"deps.toml": ""})
    assert messages(report) == ["deps.toml exists but is empty"]
    report = run(tmp_path, body, **{"deps.toml": "schema_version = 1\n"})
    assert report.ok


def test_other_file_dependencies_are_not_package_files(tmp_path: Path) -> None:
    body = "dependencies:\n  cfg: {kind: file, path: ../elsewhere/config.json}\n"
    assert run(tmp_path, body).ok  # deps check reports it, validate does not


def test_elicitation_rules(tmp_path: Path) -> None:
    body = (
        "elicitations:\n  Mode:\n    question: ' '\n    default: c\n"
        "    required_when: [{missing: Bad Fact}]\n"
        "    choices:\n      - {id: a, label: ' ', next: nowhere}\n      - {id: B, label: B}\n"
    )
    assert sorted(messages(run(tmp_path, body, resolve=False))) == sorted(
        [
            'invalid identifier "B" in elicitations.choices.id',
            'invalid identifier "Bad Fact" in elicitations.required_when.missing',
            'invalid identifier "Mode" in elicitations key',
            'unknown reference "c" in elicitations.default',
            'unknown reference "nowhere" in elicitations.choices.next',
            "spec is missing required field elicitations.choices.label",
            "spec is missing required field elicitations.question",
        ]
    )
