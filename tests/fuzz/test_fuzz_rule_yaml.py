"""Fuzz surface 2: rule YAML, through the loader and through ``harness rules lint``.

Property: the loader returns rules or diagnostics that name the file (never
raises); a file that fails disables only itself; ``rules lint`` exits 0 or 1
with parseable JSON whatever the file holds, bytes included.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from engine.cli.harness import main as harness
from engine.config import RulesConfig
from engine.rules.language.loader import compile_rule_file, load_rules
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import fuzz_settings, scratch_dir
from tests.fuzz.strategies import (
    depths,
    mutate_lines,
    nested_yaml,
    nesting_kinds,
    yaml_scalars,
)
from tests.fuzz.test_fuzz_spec_yaml import yaml_depths

_DIR = scratch_dir("fuzz-rules-")
CFG = RulesConfig(cost_limit=2_000)
TEMPLATE = """\
name: fuzz_rule
description: fuzzed
on: run_event
when: 'event.type == "restart" && count({"harness": event.harness}, duration("1h")) >= 3'
level: notify
target: harness
cooldown: 30m
message: "{harness} restarts"
"""
GOOD = TEMPLATE.replace("fuzz_rule", "good_neighbour")
assert compile_rule_file(GOOD, "g.yml", "file", CFG).rules, "the template itself must load"

mutated = st.lists(st.tuples(st.integers(0, 50), yaml_scalars), min_size=1, max_size=3).map(
    lambda edits: _apply(edits)
)
rule_texts = st.one_of(
    mutated,
    st.text(max_size=200),
    st.sampled_from(["rules: []", "rules: {}", "rules:\n  - 1\n", "---\n...\n", "- a\n- b\n"]),
)
rule_bytes = st.one_of(
    rule_texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=120),
    mutated.map(lambda t: b"\xef\xbb\xbf" + t.encode()),
)


def _apply(edits: list[tuple[int, str]]) -> str:
    text = TEMPLATE
    for index, scalar in edits:
        text = mutate_lines(text, index, scalar)
    return text


@fuzz_settings()
@given(rule_texts)
def test_compile_rule_file_returns_rules_or_located_errors(text: str) -> None:
    res = compile_rule_file(text, "fuzz.yml", "file", CFG)
    assert res.rules or res.errors
    assert all(d.location.file == "fuzz.yml" for d in res.errors)


@fuzz_settings(through_store=True)
@given(rule_bytes)
def test_a_bad_file_disables_itself_and_nothing_else(raw: bytes) -> None:
    src = _DIR / "src"
    src.mkdir(exist_ok=True)
    (src / "a_fuzz.yml").write_bytes(raw)
    (src / "b_good.yml").write_text(GOOD)
    res = load_rules([(src, "policy")], CFG)
    assert "good_neighbour" in {cr.rule.name for cr in res.rules}
    assert all(d.location.file and d.location.file.startswith(str(src)) for d in res.errors)


@fuzz_settings(through_store=True)
@given(rule_bytes, st.sampled_from(["json", "sarif", "text"]))
def test_rules_lint_is_exit_0_or_1_with_a_report(raw: bytes, fmt: str) -> None:
    path = _DIR / "lint.yml"
    path.write_bytes(raw)
    code, out, err = run_cli(harness, ["rules", "lint", str(path), "--format", fmt])
    assert_clean(code, out, err)
    assert code in (0, 1)
    if fmt == "json":
        assert json.loads(out)["ok"] is (code == 0)
    elif fmt == "sarif":
        results = json.loads(out)["runs"][0]["results"]
        assert bool([r for r in results if r["level"] == "error"]) is (code == 1)


#: Where a nested value goes: each of the rule's lines, by key (YAML nesting),
#: and the CEL condition itself (parentheses, lists and negations nested).
RULE_KEYS = ["name", "description", "on", "when", "level", "target", "cooldown", "message"]
CEL_NESTINGS = {
    "parens": lambda n: "(" * n + "true" + ")" * n,
    "lists": lambda n: "size(" + "[" * n + "]" * n + ") == 1",
    "negations": lambda n: "!" * n + "false",
}


def _nested_rule(key: str, depth: int, kind: str) -> str:
    lines = TEMPLATE.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(f"{key}:"))
    lines[i] = f"{key}: {nested_yaml(depth, kind)}"
    return "\n".join(lines) + "\n"


def _cel_rule(nesting: str, depth: int) -> str:
    lines = [x for x in TEMPLATE.splitlines() if not x.startswith("when:")]
    return "\n".join([*lines, f"when: '{CEL_NESTINGS[nesting](depth)}'"]) + "\n"


def _loads_or_locates(text: str) -> None:
    res = compile_rule_file(text, "fuzz.yml", "file", CFG)
    assert res.rules or res.errors
    assert all(d.location.file == "fuzz.yml" for d in res.errors)


def test_every_field_at_every_depth() -> None:
    """Issue 22's sweep: one rule field (or its condition) nested at each depth."""
    for depth in yaml_depths():
        for key in ("when", "message"):
            _loads_or_locates(_nested_rule(key, depth, "list" if depth % 2 else "object"))
        for nesting in CEL_NESTINGS:
            _loads_or_locates(_cel_rule(nesting, depth))


@fuzz_settings()
@given(st.sampled_from(RULE_KEYS), depths, nesting_kinds)
def test_one_field_nested_at_any_depth(key: str, depth: int, kind: str) -> None:
    _loads_or_locates(_nested_rule(key, depth, kind))


@fuzz_settings()
@given(st.sampled_from(sorted(CEL_NESTINGS)), depths)
def test_a_condition_nested_at_any_depth(nesting: str, depth: int) -> None:
    _loads_or_locates(_cel_rule(nesting, depth))
