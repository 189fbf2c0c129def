"""Fuzz surface 5: paths the OS refuses, in every field and argument that names a file (issue 22).

A NUL byte, a lone surrogate or an over-long name is not "no such file" to
the OS: ``os.stat`` raises ``ValueError`` or ENAMETOOLONG, and so do
``Path.exists()`` and ``sqlite3.connect``. Property: wherever such a path
is written (a spec's resource, import, code file, ledger or file
dependency; harness.toml's store, policy repo and token file; a rule
source; any PATH, FILE, DIR, SPEC or RUN_DIR argument) the answer is a
located error naming the field or argument, never exit 70.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cli.harness import main as harness
from engine.cli.skillspec import main as skillspec
from engine.config import RulesConfig
from engine.rules.language.loader import load_rules
from engine.skillspec.deps import check_deps
from engine.skillspec.load import check_spec
from tests.fuzz._cli import assert_clean, assert_refused, run_cli
from tests.fuzz.conftest import fuzz_settings, scratch_dir
from tests.fuzz.strategies import refused_paths, refused_paths_no_surrogates, yaml_quoted

_DIR = scratch_dir("fuzz-paths-")
for name, text in {
    "deps.toml": "[deps]\n",
    "data.txt": "x\n",
    "guide.md": "# Guide\n",
    "SKILL.md": "# Skill\n",
    "gen.py": "print(1)\n",
}.items():
    (_DIR / name).write_text(text)
SPEC_TEMPLATE = """\
schema: skillspec/v0
id: fuzz.paths
title: Paths
description: Every field that names a file; one at a time holds a path the OS refuses.
routes:
  - id: local
    label: Local
rules:
  - id: r1
    when:
      user_says_any: [agent]
    prefer: local
dependencies:
  dependency_ledger:
    kind: file
    path: @ledger@
  data_file:
    kind: file
    check:
      path: @data@
imports:
  guide:
    path: @guide@
    role: reference
    used_by: [{kind: route, id: local}]
resources:
  src:
    path: @src@
    role: source_material
    used_by: [{kind: route, id: local}]
code:
  gen:
    language: py
    kind: transform
    source:
      file: @code@
tests:
  - name: agent goes local
    input: call the agent
    expect:
      route: local
"""
GOOD = {
    "ledger": "deps.toml",
    "data": "data.txt",
    "guide": "guide.md",
    "src": "SKILL.md",
    "code": "gen.py",
}
#: Marker -> (the diagnostic's field, whether validate checks it; deps check checks the rest).
FIELDS = {
    "ledger": ("dependencies.dependency_ledger", True),
    "data": ("dependencies.data_file", False),
    "guide": ("imports.guide.path", True),
    "src": ("resources.src", True),
    "code": ("code.gen.source.file", True),
}


def _spec(marker: str, bad: str) -> tuple[Path, int, int]:
    """The spec with ``bad`` at ``marker``; (its path, the value's line, the value's column)."""
    text = SPEC_TEMPLATE
    for key, good in GOOD.items():
        text = text.replace(f"@{key}@", yaml_quoted(bad) if key == marker else good)
    lines = SPEC_TEMPLATE.splitlines()
    line = next(i for i, x in enumerate(lines, 1) if f"@{marker}@" in x)
    path = _DIR / "skill.spec.yml"
    path.write_text(text, encoding="utf-8")
    return path, line, lines[line - 1].index("@") + 1


def _good_text() -> str:
    text = SPEC_TEMPLATE
    for key, good in GOOD.items():
        text = text.replace(f"@{key}@", good)
    return text


def test_the_template_validates_with_good_paths() -> None:
    path = _DIR / "good.spec.yml"
    path.write_text(_good_text())
    report = check_spec(path)
    assert report.ok, [str(d) for d in report.errors]
    assert report.data is not None and check_deps(report.data, path).ok


def test_regression_a_nul_in_a_resource_path_is_a_located_error_not_exit_70() -> None:
    """Issue 22: ``resources.src.path: "a\\0b"`` reached ``Path.stat()`` (ValueError, exit 70)."""
    path, line, col = _spec("src", "a\x00b")
    code, out, err = run_cli(skillspec, ["validate", str(path), "--json"])
    assert_clean(code, out, err)
    assert code == 1
    (error,) = [e for e in json.loads(out)["errors"] if e["path"] == "resources.src"]
    assert (error["line"], error["col"]) == (line, col)
    assert "NUL" in error["message"]


@fuzz_settings()
@given(st.sampled_from(sorted(FIELDS)), refused_paths_no_surrogates)
def test_a_refused_path_in_any_spec_field_is_an_error_at_that_field(marker: str, bad: str) -> None:
    path, line, col = _spec(marker, bad)
    report = check_spec(path)
    field, validated = FIELDS[marker]
    validated = validated or bad.endswith("deps.toml")  # any deps.toml is a ledger validate reads
    at_field = [d for d in report.errors if d.path == field]
    if validated:
        assert at_field, [str(d) for d in report.errors]
        assert {(d.location.line, d.location.col) for d in at_field} == {(line, col)}
    else:
        assert report.ok, [str(d) for d in report.errors]  # the reference leaves it to deps
        assert report.data is not None
        (result,) = [d for d in check_deps(report.data, path).dependencies if d.id == "data_file"]
        assert result.status == "missing"


@fuzz_settings(through_store=True)
@given(
    st.sampled_from(sorted(FIELDS)),
    refused_paths_no_surrogates,
    st.sampled_from(["validate", "imports", "deps", "test", "decide"]),
)
def test_every_spec_command_answers_a_refused_path_with_a_verdict(
    marker: str, bad: str, command: str
) -> None:
    path, _, _ = _spec(marker, bad)
    argv = {
        "validate": ["validate", str(path), "--json"],
        "imports": ["imports", "check", str(path), "--json"],
        "deps": ["deps", "check", str(path), "--json"],
        "test": ["test", str(path), "--json"],
        "decide": ["decide", str(path), "--input", "call the agent", "--json"],
    }[command]
    code, out, err = run_cli(skillspec, argv)
    assert_clean(code, out, err)
    assert code in (0, 1)
    report = json.loads(out)
    if command == "decide" and code == 0:
        assert report["route"] == "local"  # a decision, not a report
    else:
        assert report["ok"] is (code == 0)


GOOD_SPEC = _DIR / "args.spec.yml"
GOOD_SPEC.write_text(_good_text())
STORE = str(_DIR / "store.db")
RULE = _DIR / "rule.yml"
RULE.write_text(
    "name: fuzz_paths\ndescription: d\non: run_event\nwhen: 'true'\nlevel: notify\n"
    "target: harness\nmessage: m\n"
)
#: Every path argument of both programs; ``@`` is where the refused path goes.
SKILLSPEC_ARGS = [
    ["validate", "@"],
    ["validate", "@", "--json"],
    ["imports", "check", "@", "--json"],
    ["deps", "check", "@"],
    ["test", "@"],
    ["decide", "@", "--input", "x"],
    ["decide", str(GOOD_SPEC), "--inputs", "@"],
    ["decide", str(GOOD_SPEC), "--input", "x", "--trace-dir", "@"],
    ["explain", str(GOOD_SPEC), "--input", "x", "--trace-dir", "@", "--json"],
    ["trace", "compact", "@"],
    ["trace", "align", str(GOOD_SPEC), "--decision-trace", "@"],
]
HARNESS_ARGS = [
    ["journal", "append", "--store", "@"],
    ["journal", "import", "@", "--store", STORE],
    ["journal", "tail", "--store", "@"],
    ["journal", "prune", "--store", "@", "--json"],
    ["rules", "lint", "@"],
    ["rules", "list", "--policy", "@", "--store", STORE],
    ["rules", "backtest", "@", "--store", STORE],
    ["rules", "backtest", str(RULE), "--policy", "@", "--store", STORE],
    ["evaluate", "--store", "@"],
    ["doctor", "--store", "@", "--json"],
    ["metrics", "--store", "@"],
    ["holds", "list", "--store", "@"],
    ["demo", "--store", "@"],
]


@fuzz_settings()
@given(refused_paths, st.sampled_from(SKILLSPEC_ARGS + HARNESS_ARGS))
def test_a_refused_path_argument_is_a_usage_error(bad: str, template: list[str]) -> None:
    argv = [bad if a == "@" else a for a in template]
    main = harness if template in HARNESS_ARGS else skillspec
    code, out, err = run_cli(main, argv)
    assert_refused(code, out, err)
    # The fast paths (validate, test, decide --inputs) hand a refused path to argparse too.
    assert "argument " in err


@fuzz_settings(through_store=True)
@given(refused_paths)
def test_the_command_hook_with_a_refused_store_exits_1_never_2(bad: str) -> None:
    """Exit 2 would make Claude Code block the tool call; a bad store must not."""
    payload = (
        b'{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash","tool_input":{}}'
    )
    code, out, err = run_cli(
        harness, ["hook", "claude-code", "--harness", "h1", "--store", bad], payload
    )
    assert_refused(code, out, err, exit_code=1)
    assert "Bad store path" in err


CONFIG_FIELDS = {
    "store.path": "[store]\npath = {}\n",
    "policy_repo.x.path": "[policy_repo.x]\npath = {}\n",
    "serve.token_file": "[serve]\ntoken_file = {}\n",
}


@fuzz_settings()
@given(st.sampled_from(sorted(CONFIG_FIELDS)), refused_paths_no_surrogates)
def test_a_refused_path_in_harness_toml_is_located_there(
    monkeypatch: pytest.MonkeyPatch, field: str, bad: str
) -> None:
    config = _DIR / "harness.toml"
    config.write_text(CONFIG_FIELDS[field].format(json.dumps(bad)), encoding="utf-8")
    monkeypatch.setenv("HARNESS_CONFIG", str(config))
    code, out, err = run_cli(harness, ["journal", "tail", "--json"])
    assert_refused(code, out, err)
    (diag,) = json.loads(out)["error"]["diagnostics"]
    assert (diag["path"], diag["file"], diag["line"]) == (field, str(config), 2)
    code, out, err = run_cli(harness, ["doctor", "--json"])  # doctor reports it as a check
    assert_clean(code, out, err)
    assert code == 1 and field in out
    code, out, err = run_cli(harness, ["hook", "claude-code", "--harness", "h1"], b"{}")
    assert_refused(code, out, err, exit_code=1)  # never 2: that would block the agent
    assert "Invalid harness.toml" in err


@fuzz_settings()
@given(refused_paths)
def test_a_refused_rule_source_disables_itself_only(bad: str) -> None:
    src = _DIR / "rules"
    src.mkdir(exist_ok=True)
    (src / "good.yml").write_text(RULE.read_text())
    res = load_rules([(Path(bad), "policy"), (src, "policy")], RulesConfig(cost_limit=2_000))
    assert [cr.rule.name for cr in res.rules] == ["fuzz_paths"]
    (error,) = res.errors
    assert error.location.file == str(Path(bad)) and "refused" in error.message
