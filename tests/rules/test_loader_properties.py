"""Property tests: random rule files and CEL strings never crash the loader.

"Never crash" means: the loader returns rules or located diagnostics, never
raises; every diagnostic names the file; a rule that loads evaluates without
raising on arbitrary rows; and loading is deterministic (same text, same hash).
"""

from __future__ import annotations

from collections.abc import Mapping

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import RulesConfig
from engine.rules.language.loader import compile_rule_file
from engine.rules.language.model import KIND_NAMES, LEVELS

CFG = RulesConfig(cost_limit=2_000)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOKENS = [
    "event.type", "event.harness", "event.n", "event.seq", "event.path", "event.nope", "now",
    '"restart"', '"h1"', "1", "0", "-1", "2.5", "3u", "true", "null", 'b"x"',
    "&&", "||", "!", "==", "!=", "<", ">=", "+", "-", "*", "/", "%", "?", ":", "in",
    "(", ")", "[", "]", "{", "}", ",", ".", "has(", "size(", "int(", "string(",
    'count({"harness": event.harness}, duration("1h"))',
    'distinct("run", {"type": "x"}, duration("2h"))',
    'exists({"path": event.path}, duration("5m"))',
    'count({"bogus": "1"}, duration("1h"))', 'count({"run": "a"}, duration("999h"))',
    "count(", "distinct(", "exists(", 'duration("1h")', 'timestamp("2020-01-01T00:00:00Z")',
    ".exists(x, x > 1)", ".all(y, y == 2)", ".map(z, z)", "[1, 2, 3]", "x", "y",
    "matches(", '"a.*"', "\n", "//c\n", "'", '"', "\\", "\u00e9", "\x00",
]  # fmt: skip

cel_text = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25).map(" ".join)

_keys = st.sampled_from(["harness", "type", "run", "path", "cause_digest", "bogus"])
_windows = st.sampled_from(["1h", "30m", "168h", "169h", "0s", "1d", "90s", "2h30m"])
_ints = st.integers(-3, 1_000_001).map(str)


@st.composite
def _primitive(draw: st.DrawFn) -> str:
    keys = draw(st.lists(_keys, max_size=3))
    sel = "{" + ", ".join(f'"{k}": event.{k if k != "bogus" else "type"}' for k in keys) + "}"
    win = f'duration("{draw(_windows)}")'
    fn = draw(st.sampled_from(["count", "distinct", "exists"]))
    if fn == "exists":
        return f"exists({sel}, {win})"
    prefix = f'"{draw(_keys)}", ' if fn == "distinct" else ""
    return f"{fn}({prefix}{sel}, {win}) {draw(st.sampled_from(['>=', '==', '<']))} {draw(_ints)}"


_atoms = st.one_of(
    st.sampled_from(
        ['event.type == "restart"', "has(event.path)", 'event.harness != ""', "true",
         "[1, 2].exists(x, x > event.n)", "event.seq % 2 == 0", "100 / event.n > 1",
         'now > timestamp("2001-01-01T00:00:00Z")', 'event.type in ["restart", "collision"]']
    ),
    _ints.map(lambda i: f"event.n > {i}"),
    _primitive(),
)  # fmt: skip
bool_exprs = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"({t[0]} && {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]} || {t[1]}"),
        inner.map(lambda a: f"!({a})"),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
    ),
    max_leaves=12,
)
printable = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)


class Host:
    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        return len(selector) * 7

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        return 2

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        return True


rows = st.fixed_dictionaries(
    {
        "seq": st.integers(0, 2**40),
        "type": st.sampled_from(["restart", "tool_call", "collision", ""]),
        "kind": st.sampled_from(KIND_NAMES),
        "source": st.just("observer"),
    },
    optional={
        "harness": st.one_of(st.none(), st.text(max_size=5)),
        "path": st.one_of(st.none(), st.text(max_size=5)),
        "n": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    },
)


def check(text: str) -> None:
    res = compile_rule_file(text, "prop.yml", "policy", CFG)
    assert res.rules or res.errors
    for d in (*res.errors, *res.warnings):
        assert d.location.file == "prop.yml" and d.message
        d.render(text)  # rendering a caret never fails either
    again = compile_rule_file(text, "prop.yml", "policy", CFG)
    assert [c.rule.hash for c in again.rules] == [c.rule.hash for c in res.rules]


def rule_file(when: str, on: str = "run_event") -> str:
    return yaml.safe_dump(
        {"name": "p", "on": on, "when": when, "level": "notify", "target": "type"},
        allow_unicode=True,
    )


@SETTINGS
@given(when=cel_text, on=st.sampled_from(KIND_NAMES), row=rows, now=st.integers(0, 2**45))
def test_random_cel_never_crashes_loader_or_evaluator(
    when: str, on: str, row: dict[str, object], now: int
) -> None:
    text = rule_file(when, on)
    check(text)
    res = compile_rule_file(text, "prop.yml", "policy", CFG)
    for cr in res.rules:
        out = cr.evaluate(row, now, Host())
        assert isinstance(out.matched, bool)
        assert out.error is None or not out.matched


@SETTINGS
@given(when=bool_exprs, row=rows, now=st.integers(0, 2**45))
def test_generated_rules_load_or_fail_cleanly_and_evaluate(
    when: str, row: dict[str, object], now: int
) -> None:
    text = rule_file(when, "run_event")
    check(text)
    res = compile_rule_file(text, "prop.yml", "policy", CFG)
    for cr in res.rules:
        assert len(cr.rule.primitives) <= 8 and cr.rule.static_cost <= CFG.cost_limit
        out = cr.evaluate(dict(row, kind="run_event"), now, Host())
        assert out.error is None or not out.matched
        assert out.cost <= CFG.cost_limit or out.error == "cost limit exceeded"
        assert len(out.calls) <= len(cr.rule.primitives)


@SETTINGS
@given(text=printable)
def test_random_text_never_crashes(text: str) -> None:
    check(text)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), printable,
    st.sampled_from([*KIND_NAMES, *LEVELS, "30m", "harness", "{harness}", "event.type == 'x'"]),
)  # fmt: skip
keys = st.sampled_from(
    ["name", "on", "when", "level", "target", "cooldown", "message", "description", "rules", "x"]
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=8)),
    max_leaves=20,
)


@SETTINGS
@given(doc=yaml_values)
def test_random_yaml_structures_never_crash(doc: object) -> None:
    check(yaml.safe_dump(doc, allow_unicode=True))


GOOD = """\
name: restart_same_error
on: run_event
when: >-
  event.type == "restart" &&
  count({"harness": event.harness, "type": "restart"}, duration("1h")) >= 3
level: hold
target: harness
cooldown: 30m
message: "{harness} restarts"
"""


@SETTINGS
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(GOOD)), st.integers(0, 3), st.text(max_size=3)), max_size=4
    )
)
def test_mutated_good_file_never_crashes(edits: list[tuple[int, int, str]]) -> None:
    text = GOOD
    for pos, cut, ins in edits:
        text = text[:pos] + ins + text[pos + cut :]
    check(text)


@SETTINGS
@given(when=bool_exprs)
def test_normalized_when_is_valid_cel_with_the_same_meaning(when: str) -> None:
    res = compile_rule_file(rule_file(when), "prop.yml", "policy", CFG)
    for cr in res.rules:
        again = compile_rule_file(rule_file(cr.rule.normalized_when), "n.yml", "policy", CFG)
        assert [c.rule.hash for c in again.rules] == [cr.rule.hash], cr.rule.normalized_when
        assert again.rules[0].rule.normalized_when == cr.rule.normalized_when
