"""Properties (hypothesis): a bad rule is disabled alone and changes no other rule's fires;
random CEL never crashes the evaluator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import RulesConfig
from engine.rules.evaluation.evaluator import RowEvaluator, fast_host_for
from engine.rules.evaluation.window import COLUMNS
from engine.rules.language.loader import compile_rule_text
from engine.rules.language.model import CompiledRule

T0 = 1_767_225_600_000
CAUSES = ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
TYPES = ("restart", "tool_call", "verify_failed")


def journal(seed: int, n: int = 160) -> list[tuple[Any, ...]]:
    """Row tuples in window.COLUMNS order (text absent = ""), deterministic per seed."""
    import random

    rng = random.Random(seed)
    rows = []
    at = T0
    for seq in range(1, n + 1):
        at += rng.choice((0, 1_000, 30_000, 120_000))
        values = dict.fromkeys(COLUMNS, "")
        values.update(
            seq=seq,
            at=at,
            kind="run_event",
            type=rng.choice(TYPES),
            source="observer",
            harness=rng.choice(("h1", "h2")),
            run=rng.choice(("r1", "r2", "r3")),
            path=rng.choice(("12", "7", "x.py", "")),
            cause_digest=rng.choice(CAUSES),
            n=rng.randint(0, 3),
        )
        rows.append(tuple(values[c] for c in COLUMNS))
    return rows


def compile_when(name: str, when: str) -> CompiledRule | None:
    text = (
        f"name: {name}\non: run_event\nwhen: {json.dumps(when)}\nlevel: notify\n"
        "target: harness\ncooldown: 0s\nmessage: m\n"
    )
    compiled, _errors = compile_rule_text(text, f"{name}.yml", "file", RulesConfig())
    return compiled


def run(rules: list[CompiledRule], rows: list[tuple[Any, ...]]) -> tuple[list[Any], RowEvaluator]:
    core = RowEvaluator(rules, fast_host_for(rules))
    fires = [f for r in rows for f in core.process(r)]
    return fires, core


GOOD_TEMPLATES = (
    'event.type == "{t}" && count({{"harness": event.harness, "type": "{t}"}},'
    ' duration("{w}m")) >= {k}',
    'event.type == "{t}" && distinct("run", {{"cause_digest": event.cause_digest}},'
    ' duration("{w}m")) >= {k}',
    'exists({{"harness": event.harness, "type": "{t}"}}, duration("{w}m")) && event.n >= {k}',
    'event.type == "{t}" && event.n + {k} > 3',
)
#: Each errors at run time on some rows (non-numeric path; n == k divides by zero).
BAD_TEMPLATES = (
    'event.type == "{t}" && int(event.path) > {k}',
    "100 / (event.n - {k}) > 0",
)

good_rule = st.builds(
    lambda tpl, t, w, k: tpl.format(t=t, w=w, k=k),
    st.sampled_from(GOOD_TEMPLATES),
    st.sampled_from(TYPES),
    st.integers(1, 120),
    st.integers(1, 4),
)
bad_rule = st.builds(
    lambda tpl, t, k: tpl.format(t=t, k=k),
    st.sampled_from(BAD_TEMPLATES),
    st.sampled_from(TYPES),
    st.integers(0, 3),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    goods=st.lists(good_rule, min_size=1, max_size=4),
    bad=bad_rule,
    position=st.integers(0, 4),
    seed=st.integers(0, 10_000),
)
def test_a_bad_rule_is_disabled_alone_and_other_fires_are_unchanged(
    goods: list[str], bad: str, position: int, seed: int
) -> None:
    rules = [compile_when(f"good_{i}", w) for i, w in enumerate(goods)]
    assert all(r is not None for r in rules)
    good_rules = [r for r in rules if r is not None]
    bad_rule_ = compile_when("bad", bad)
    assert bad_rule_ is not None
    rows = journal(seed)
    alone, _ = run(good_rules, rows)
    mixed_rules = [*good_rules]
    mixed_rules.insert(min(position, len(mixed_rules)), bad_rule_)
    mixed, core = run(mixed_rules, rows)
    assert [f.key() for f in mixed if f.rule != "bad"] == [f.key() for f in alone]
    errors = [e for e in core.rule_errors if e.rule == "bad"]
    assert [e.rule for e in core.rule_errors] == [e.rule for e in errors]  # nobody else
    if errors:
        (err,) = errors
        assert core.disabled == {"bad": err.error}
        assert all(f.seq < err.seq for f in mixed if f.rule == "bad")
    else:  # the journal never hit the failing case
        assert core.disabled == {}


_ATOMS = st.sampled_from(
    [
        "event.type",
        "event.harness",
        "event.path",
        "event.n",
        "event.seq",
        '"restart"',
        "3",
        "0",
        "true",
        "now",
        'duration("1h")',
        'count({"harness": event.harness}, duration("1h"))',
        'distinct("run", {"type": event.type}, duration("10m"))',
        'exists({"cause_digest": event.cause_digest}, duration("168h"))',
        "[1, 2, 3]",
        "event.nope",
        "size(event.path)",
        "int(event.path)",
    ]
)
_OPS = st.sampled_from(["==", "!=", "<", ">=", "&&", "||", "+", "-", "/", "%", "in"])


@st.composite
def cel_text(draw: st.DrawFn) -> str:
    parts = [draw(_ATOMS)]
    for _ in range(draw(st.integers(0, 4))):
        parts.append(draw(_OPS))
        parts.append(draw(_ATOMS))
    text = " ".join(parts)
    if draw(st.booleans()):
        text = f"!({text})"
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(cel_text(), min_size=1, max_size=3), seed=st.integers(0, 1000))
def test_random_cel_never_crashes_the_evaluator(texts: list[str], seed: int) -> None:
    rules = [r for i, t in enumerate(texts) if (r := compile_when(f"r{i}", t)) is not None]
    rows = journal(seed, n=60)
    fires, core = run(rules, rows)  # must not raise
    for f in fires:
        assert f.rule in {r.rule.name for r in rules}
    for err in core.rule_errors:
        assert err.error and err.rule in core.disabled


def test_random_rule_files_on_disk_never_crash_the_evaluator(tmp_path: Path) -> None:
    """A hand-picked set of odd but loadable rules, through the real loader path."""
    from engine.rules.language.loader import load_rules

    odd = {
        "deep.yml": "event.type in ['restart'] && [1, 2].all(x, [3].exists(y, y > x))",
        "strings.yml": 'event.path.startsWith("1") && size(event.path) > 0',
        "huge.yml": "event.n * 9223372036854775807 > 1",  # overflows at run time
    }
    for name, when in odd.items():
        (tmp_path / name).write_text(
            f"name: {name[:-4]}\non: run_event\nwhen: {json.dumps(when)}\nlevel: notify\n"
            "target: harness\n"
        )
    loaded = load_rules([(tmp_path, "file")], RulesConfig())
    fires, core = run(list(loaded.rules), journal(5))
    names = {cr.rule.name for cr in loaded.rules}
    assert {f.rule for f in fires} | set(core.disabled) <= names
    if "huge" in names:
        assert "huge" in core.disabled  # the overflow disabled it, and only it
