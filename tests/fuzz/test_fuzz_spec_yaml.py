"""Fuzz surface 3: spec YAML, through ``check_spec`` and ``skillspec validate --json``.

Property: checking a spec never raises (every problem is a diagnostic naming
the file), and ``skillspec validate`` exits 0, 1 (invalid spec, a file that
does not parse included) or 2 (cannot read) with JSON that says the same.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from engine.cli.skillspec import main as skillspec
from engine.skillspec.load import check_spec
from engine.yamlsrc import MAX_DEPTH
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import depth_sweep, fuzz_settings, scratch_dir
from tests.fuzz.strategies import (
    DEEPEST,
    depths,
    mutate_lines,
    nested_yaml,
    nesting_kinds,
    yaml_scalars,
)

_DIR = scratch_dir("fuzz-spec-")
(_DIR / "guide.md").write_text("# Guide\n\n## Usage\ntext\n")
(_DIR / "SKILL.md").write_text("# Skill\n")
TEMPLATE = """\
schema: skillspec/v0
id: fuzz.spec
title: Fuzz
description: A spec the fuzzer edits one value at a time.
metadata:
  owner: me
  count: 3
routes:
  - id: local
    label: Local
    rank: 10
    execution_plan:
      phases:
        - id: p1
          route: local
          owner_skill: fuzz.spec
rules:
  - id: r1
    when:
      user_says_any: [agent, "007"]
    prefer: local
    allow:
      max_files: 12
    forbid: [force_push]
imports:
  guide:
    path: guide.md
    role: reference
    section: Usage
    used_by:
      - kind: route
        id: local
resources:
  src:
    path: SKILL.md
    role: source_material
commands:
  build:
    template: make
    requires:
      resources: [src]
code:
  gen:
    language: py
    kind: transform
    source: {inline: print(1)}
    outputs: [out]
artifacts:
  out:
    kind: json
    schema: {type: object}
    produced_by: [{kind: code, id: gen}]
    consumed_by: [{kind: command, id: build}]
tests:
  - name: agent goes local
    input: call the agent
    expect:
      route: local
"""

mutated = st.lists(st.tuples(st.integers(0, 200), yaml_scalars), min_size=1, max_size=4).map(
    lambda edits: _apply(edits)
)
spec_bytes = st.one_of(
    mutated.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
    mutated.map(lambda t: b"\xef\xbb\xbf" + t.encode("utf-8", "surrogatepass")),
)


def _apply(edits: list[tuple[int, str]]) -> str:
    text = TEMPLATE
    for index, scalar in edits:
        text = mutate_lines(text, index, scalar)
    return text


def test_the_template_itself_validates() -> None:
    path = _DIR / "template.spec.yml"
    path.write_text(TEMPLATE)
    report = check_spec(path)
    assert report.ok, [str(d) for d in report.errors]


@fuzz_settings()
@given(spec_bytes)
def test_check_spec_never_raises_and_locates_every_error(raw: bytes) -> None:
    path = _DIR / "skill.spec.yml"
    path.write_bytes(raw)
    report = check_spec(path)
    assert report.ok or report.errors
    assert all(d.location.file for d in report.errors)
    assert not report.unreadable  # it was read; only a file that cannot be read is exit 2


@fuzz_settings(through_store=True)
@given(spec_bytes, st.sampled_from(["validate", "imports", "deps"]))
def test_skillspec_validate_exits_with_a_verdict(raw: bytes, command: str) -> None:
    path = _DIR / "cli.spec.yml"
    path.write_bytes(raw)
    argv = (
        [command, str(path), "--json"]
        if command == "validate"
        else [command, "check", str(path), "--json"]
    )
    code, out, err = run_cli(skillspec, argv)
    assert_clean(code, out, err)
    assert code in (0, 1)
    assert json.loads(out)["ok"] is (code == 0)


#: Depths where YAML handling changes, each tried: our nesting cap and libyaml's own (1000).
YAML_EDGES = {*range(MAX_DEPTH - 2, MAX_DEPTH + 3), *range(998, 1003)}


def yaml_depths() -> list[int]:
    """Every depth under the slow profile; else the YAML edges and every 97th depth.

    Parsed YAML never nests deeper than ``MAX_DEPTH`` (the builder refuses it), so no
    window near the recursion limit exists to sweep densely: the Hypothesis tests
    below draw any depth, and the slow profile sweeps them all.
    """
    return sorted(set(depth_sweep(DEEPEST, band=3, stride=97)) | YAML_EDGES)


#: Lines whose value can hold any nested value (free-form maps, a schema, a rule's allow)
#: or must not (a route's rank, a test's input, a rule's prefer).
NESTABLE = {
    "  count: 3": "metadata.count",
    "      max_files: 12": "rules[0].allow.max_files",
    "    schema: {type: object}": "artifacts.out.schema",
    "    rank: 10": "routes[0].rank",
    "    input: call the agent": "tests[0].input",
    "    prefer: local": "rules[0].prefer",
}


def _nested_spec(line: str, depth: int, kind: str) -> str:
    key = line.partition(":")[0]
    return TEMPLATE.replace(line, f"{key}: {nested_yaml(depth, kind)}")


def _checks_and_locates(text: str) -> None:
    path = _DIR / "deep.spec.yml"
    path.write_text(text)
    report = check_spec(path)
    assert report.ok or report.errors
    assert all(d.location.file == str(path) and d.location.line for d in report.errors)


def test_every_field_at_every_depth() -> None:
    """Issue 22's sweep: one spec field nested at each depth (not just a random few)."""
    for depth in yaml_depths():
        for line in NESTABLE:
            _checks_and_locates(_nested_spec(line, depth, "list" if depth % 2 else "object"))


@fuzz_settings()
@given(st.sampled_from(sorted(NESTABLE)), depths, nesting_kinds)
def test_one_field_nested_at_any_depth(line: str, depth: int, kind: str) -> None:
    _checks_and_locates(_nested_spec(line, depth, kind))


@fuzz_settings(through_store=True)
@given(st.sampled_from(sorted(NESTABLE)), depths, st.sampled_from(["validate", "test", "decide"]))
def test_every_spec_command_answers_a_deep_field(line: str, depth: int, command: str) -> None:
    path = _DIR / "deep-cli.spec.yml"
    path.write_text(_nested_spec(line, depth, "list"))
    argv = {
        "validate": ["validate", str(path), "--json"],
        "test": ["test", str(path), "--json"],
        "decide": ["decide", str(path), "--input", "call the agent", "--json"],
    }[command]
    code, out, err = run_cli(skillspec, argv)
    assert_clean(code, out, err)
    assert code in (0, 1)
