"""Property (hypothesis): the prefiltered backtest fires exactly like the unfiltered one.

Rules are generated from guard forms the prefilter must use (literal
equalities, IN lists, ``||`` chains, ``!=``) and forms it must refuse
(negation, ternaries, functions, non-literal operands, ``has()``, mixed-field
``||``), combined with up to two aggregates: selectors the window index
filters on a literal, selectors with no literal at all (``{"harness":
event.harness}``, an empty one) that it must see every row for or SQL must
answer, thresholds that are gates with a floor, without one, or none. Journals
mix kinds, types, NULL and empty columns, equal timestamps and ticks. The
prefiltered replay runs with every way of answering aggregates (the cost
model's choice, everything SQL can serve in SQL, everything in the window
index), with the default policy and with the lifecycle (ticks, cooldowns,
shadow, holds), over the whole journal and from a seq in the middle (warm
window), with its candidate rows read in this thread and by a producer thread
(:mod:`engine.rules.evaluation.pipeline`); the reference reads every row into
a window index fed every shape.
"""

from __future__ import annotations

import itertools
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import HarnessConfig
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation import pipeline
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.language.model import CompiledRule
from engine.store.db import connect
from tests.rules.test_evaluator import T0, insert, make_rule

TYPES = ("restart", "tool_call", "verify_failed", "loop_stopped")
HARNESSES = ("h1", "h2", "", None)
OUTCOMES = ("ok", "error", "", None)

#: (when guard, True if the prefilter may use it); {t} is a type, {u} another one.
GUARDS: tuple[tuple[str, bool], ...] = (
    ('event.type == "{t}"', True),
    ('"{t}" == event.type', True),
    ('event.type in ["{t}", "{u}"]', True),
    ('(event.type == "{t}" || event.type == "{u}")', True),
    ('event.type == "{t}" && event.outcome == "error"', True),
    ('event.harness == ""', True),
    ('event.type == "{t}" && event.type == "{u}"', True),
    ('!(event.type == "{t}")', False),
    ('event.type != "{t}"', False),
    ('(event.type == "{t}" ? true : event.outcome == "ok")', False),
    ('event.type.startsWith("{t}")', False),
    ("event.type == event.harness", False),
    ("has(event.outcome)", False),
    ('(event.type == "{t}" || event.harness == "h1")', False),
    ("true", False),
)

#: Aggregates: literal-typed selectors (filtered feeds), ones with no literal at all (every
#: row, or SQL on an index), thresholds with a floor (SQL may test them), without one, none.
AGGREGATES: tuple[str, ...] = (
    "",
    'count({{"harness": event.harness, "type": "{t}"}}, duration("10m")) >= 2',
    'count({{"type": "{u}"}}, duration("1h")) >= 1',
    'exists({{"harness": event.harness, "outcome": "error"}}, duration("30m"))',
    'distinct("outcome", {{"type": "{t}"}}, duration("2h")) >= 2',
    'count({{"harness": event.harness}}, duration("5m")) >= 3',
    'distinct("outcome", {{"harness": event.harness}}, duration("20m")) >= 2',
    'count({{"harness": event.harness, "type": event.type}}, duration("3m")) > 1',
    '!exists({{"harness": event.harness, "outcome": "ok"}}, duration("2m"))',
    'count({{"outcome": event.outcome}}, duration("10m")) < 3',
    'exists({{"type": event.type, "outcome": ""}}, duration("5m"))',
    '2 <= count({{}}, duration("1m"))',
    'count({{"harness": event.harness}}, duration("1m")) == 2',
    '(count({{"harness": event.harness}}, duration("4m")) >= 2 || event.outcome == "ok")',
)

_CACHE: dict[tuple[str, str, str], CompiledRule] = {}


def rule(
    index: int, guard: str, agg: str, t: str, u: str, level: str, agg2: str = ""
) -> CompiledRule:
    when = guard.format(t=t, u=u)
    for part in (agg, agg2):
        if part:
            when = f"{when} && {part.format(t=t, u=u)}"
    key = (when, level, str(index))
    if key not in _CACHE:
        _CACHE[key] = make_rule(f"r{index}", when, level=level, cooldown="2m")
    return _CACHE[key]


rule_specs = st.lists(
    st.tuples(
        st.integers(0, len(GUARDS) - 1),
        st.integers(0, len(AGGREGATES) - 1),
        st.sampled_from(TYPES),
        st.sampled_from(TYPES),
        st.sampled_from(("annotate", "notify", "hold")),
        st.integers(0, len(AGGREGATES) - 1),
    ),
    min_size=1,
    max_size=4,
)


def build_journal(path: Path, seed: int, n: int) -> None:
    rng = random.Random(seed)
    rows = []
    at = T0
    for _ in range(n):
        at += rng.choice((0, 1_000, 60_000, 240_000))
        if rng.random() < 0.15:
            rows.append((at, "tick", "tick", "tick", *([None] * 11)))
            continue
        kind = rng.choice(("run_event", "run_event", "graph_event"))
        rows.append(
            (
                at,
                kind,
                rng.choice(TYPES),
                "observer",
                rng.choice(HARNESSES),
                "p",
                None,
                None,
                rng.choice(OUTCOMES) if kind == "run_event" else None,
                None,
                None,
                None,
                None,
                None,
                None,
            )
        )
    conn = connect(path)
    insert(conn, rows)
    conn.close()


def full_keys(fires: Any) -> list[tuple[Any, ...]]:
    """Everything the issue pins: seq, rule, hash, target, level, aggregates, status (and cost)."""
    return [(*f.key(), f.status, f.effective_level, f.cost) for f in fires]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(specs=rule_specs, seed=st.integers(0, 10_000), n=st.integers(1, 400))
def test_prefiltered_backtest_fires_like_the_unfiltered_one(
    specs: list[tuple[int, int, str, str, str, int]], seed: int, n: int, small_chunks: None
) -> None:
    rules = [
        rule(i, GUARDS[g][0], AGGREGATES[a], t, u, level, AGGREGATES[b])
        for i, (g, a, t, u, level, b) in enumerate(specs)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.db"
        build_journal(path, seed, n)
        conn = connect(path)
        authority = Authority.from_config(HarnessConfig())
        middle = max(1, n // 2)
        for rng_args in ({}, {"from_seq": middle}):
            seq_range = resolve_range(conn, **rng_args)  # type: ignore[arg-type]
            plain = run_backtest(conn, rules, seq_range, prefilter=False)
            life_plain = backtest_with_lifecycle(conn, rules, seq_range, authority, prefilter=False)
            assert plain.rows_scanned == seq_range.rows
            for mode in MODES:
                fast = run_backtest(conn, rules, seq_range, replay=mode)
                assert full_keys(fast.fires) == full_keys(plain.fires), mode
                # The candidate rows found by a second thread, in chunks of 16 rows.
                piped = run_backtest(conn, rules, seq_range, replay=mode, pipeline=True)
                assert full_keys(piped.fires) == full_keys(plain.fires), mode
                assert piped.rows_scanned == fast.rows_scanned
                assert fast.rule_errors == plain.rule_errors
                assert fast.rows_evaluated == plain.rows_evaluated
                assert fast.rows_scanned <= plain.rows_scanned
                life_fast = backtest_with_lifecycle(conn, rules, seq_range, authority, replay=mode)
                assert full_keys(life_fast.fires) == full_keys(life_plain.fires), mode
                assert life_fast.extra == life_plain.extra
                life_piped = backtest_with_lifecycle(conn, rules, seq_range, authority,
                                                     replay=mode, pipeline=True)  # fmt: skip
                assert full_keys(life_piped.fires) == full_keys(life_plain.fires), mode
                assert life_piped.extra == life_plain.extra
        conn.close()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipelined replays read in chunks of 16 journal rows and fetch 3 rows at a time."""
    monkeypatch.setattr(pipeline, "CHUNK", 16)
    monkeypatch.setattr(pipeline, "FETCH", 3)


#: Every way a prefiltered replay may answer aggregates (see engine.rules.evaluation.replay).
MODES = ("auto", "sql", "tally", "window")


def test_refused_guards_really_are_refused() -> None:
    """The generator's refuse list is not vacuous: those rules get no condition beyond kind."""
    from engine.rules.language.prefilter import for_rule

    for (guard, usable), (t, u) in itertools.product(GUARDS, [("restart", "tool_call")]):
        conditions = for_rule(rule(99, guard, "", t, u, "notify")).conditions
        assert bool(conditions) == usable, guard
