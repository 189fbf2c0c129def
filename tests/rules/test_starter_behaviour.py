"""The starter pack on the simulated fleet: it fires on the planted patterns, where they
were planted, and stays silent on a quiet fleet doing the same background work.

The simulator's docstring (``engine/fleet/sim.py``) lists the planted patterns;
these tests check each starter rule's fires against that list (harness, path,
cause, day), through the live evaluator, and check the backtest agrees.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from engine.config import RulesConfig
from engine.fleet.sim import (
    CHURN_PATH,
    COLLISION_PATH,
    DAY_MS,
    DEFAULT_START_MS,
    RESTART_CAUSE,
    VERIFY_CAUSE_A,
    VERIFY_CAUSE_B,
    write_fleet,
)
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.fires import Fire, list_fires
from engine.rules.evaluation.live_evaluator import LiveEvaluator
from engine.rules.language.loader import default_sources, load_rules
from engine.store.db import connect

DAYS = 4
pytestmark = pytest.mark.slow  # two 4-day fleets: about 20 s
STARTER = (
    "budget_exhausted_repeatedly",
    "file_churn",
    "file_collision",
    "loop_guard_repeated",
    "restart_same_error",
    "verify_same_failure",
)


def _starter() -> list[Any]:
    rules = list(load_rules(default_sources(), RulesConfig()).rules)
    assert sorted(cr.rule.name for cr in rules) == list(STARTER)
    return rules


def _fleet(tmp: Path, quiet: bool) -> tuple[list[Fire], Any]:
    path = tmp / ("quiet.db" if quiet else "fleet.db")
    conn = connect(path)
    write_fleet(conn, days=DAYS, quiet=quiet, validate=False)
    rules = _starter()
    live = LiveEvaluator(conn, rules, batch_size=5000).run_until_idle()
    back = run_backtest(conn, rules, resolve_range(conn))
    assert sorted(f.key() for f in back.fires) == sorted(f.key() for f in list_fires(conn))
    total = conn.execute("SELECT count(*) FROM rule_journal").fetchone()[0]
    return live, total


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> list[Fire]:
    fires, _ = _fleet(tmp_path_factory.mktemp("busy"), quiet=False)
    return fires


def _by_rule(fires: list[Fire]) -> dict[str, list[Fire]]:
    out: dict[str, list[Fire]] = defaultdict(list)
    for f in fires:
        out[f.rule].append(f)
    return out


def _day(f: Fire) -> int:
    return (f.at - DEFAULT_START_MS) // DAY_MS


def _selector(f: Fire, i: int = 0) -> dict[str, str]:
    return dict(f.calls[i].selector)


def test_every_starter_rule_fires_on_the_planted_patterns(busy: list[Fire]) -> None:
    by = _by_rule(busy)
    assert sorted(by) == list(STARTER), {k: len(v) for k, v in by.items()}


def test_verify_failures_fire_for_the_planted_causes_only(busy: list[Fire]) -> None:
    fires = _by_rule(busy)["verify_same_failure"]
    causes = {_selector(f)["cause_digest"] for f in fires}
    assert causes <= {VERIFY_CAUSE_A, VERIFY_CAUSE_B} and causes
    assert {f.target for f in fires} <= {"h03", "h09"}
    assert all(f.calls[0].result >= 3 for f in fires)


def test_restarts_into_the_same_error_fire_for_h05_on_its_days(busy: list[Fire]) -> None:
    fires = _by_rule(busy)["restart_same_error"]
    assert {f.target for f in fires} == {"h05"}
    assert {_selector(f)["cause_digest"] for f in fires} == {RESTART_CAUSE}
    assert {_day(f) % 3 for f in fires} == {1}
    assert all(f.level == "hold" and f.effective_level == "notify" for f in fires)


def test_loop_guard_budget_collision_and_churn_fire_where_planted(busy: list[Fire]) -> None:
    by = _by_rule(busy)
    loop = by["loop_guard_repeated"]
    assert {f.target for f in loop} == {"h06"} and {_day(f) % 2 for f in loop} == {1}
    budget = by["budget_exhausted_repeatedly"]
    assert {f.target for f in budget} <= {"h11", "h12"} and budget
    collision = by["file_collision"]
    assert {f.target for f in collision} == {COLLISION_PATH}
    assert {f.level for f in collision} == {"annotate"}
    churn = by["file_churn"]
    assert {f.target for f in churn} == {CHURN_PATH}


def test_a_quiet_fleet_gives_no_fire_at_all(tmp_path: Path) -> None:
    fires, total = _fleet(tmp_path, quiet=True)
    assert total > 150_000  # the same background work: tool calls, edits, unique failures
    assert fires == []


def test_without_the_planted_harnesses_their_rules_stay_silent(tmp_path: Path) -> None:
    conn = connect(tmp_path / "small.db")
    write_fleet(conn, days=DAYS, harnesses=2, validate=False)  # only h01 and h02
    fires = LiveEvaluator(conn, _starter(), batch_size=5000).run_until_idle()
    assert {f.rule for f in fires} <= {"file_collision"}  # h01/h02 still collide
    assert {f.target for f in fires} <= {COLLISION_PATH}
