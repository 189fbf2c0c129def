"""The simulated fleet: deterministic, realistic rates, planted patterns, quiet stretches."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from engine.fleet import sim
from engine.fleet.realtime import run_live
from engine.journal.rows import check_values
from tests.journal._util import all_rows, store

HOUR = sim.HOUR_MS
DAY = sim.DAY_MS
DAYS = 6


@pytest.fixture(scope="module")
def fleet() -> list[dict[str, Any]]:
    return list(sim.iter_fleet_rows(days=DAYS, seed=7))


@pytest.fixture(scope="module")
def quiet_fleet() -> list[dict[str, Any]]:
    return list(sim.iter_fleet_rows(days=DAYS, seed=7, quiet=True))


def test_the_same_seed_gives_the_same_history_and_another_seed_does_not() -> None:
    a = list(sim.iter_fleet_tuples(days=1, seed=3))
    b = list(sim.iter_fleet_tuples(days=1, seed=3))
    c = list(sim.iter_fleet_tuples(days=1, seed=4))
    assert a == b
    assert a != c


def test_fewer_harnesses_keep_the_rows_of_the_remaining_ones() -> None:
    big = [r for r in sim.iter_fleet_tuples(days=1, harnesses=12) if r[4] in ("h01", "h02")]
    small = [r for r in sim.iter_fleet_tuples(days=1, harnesses=2) if r[4] in ("h01", "h02")]
    big_runs = [r for r in big if r[1] == "run_event"]
    small_runs = [r for r in small if r[1] == "run_event"]
    assert big_runs == small_runs


def test_every_row_passes_admission_and_time_never_goes_back() -> None:
    rows = list(sim.iter_fleet_tuples(days=2))
    for row in rows:
        check_values(row)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(rows))


def test_about_fifty_thousand_tool_calls_a_day(fleet: list[dict[str, Any]]) -> None:
    calls = sum(1 for r in fleet if r["type"] == "tool_call")
    per_day = calls / DAYS
    assert 45_000 <= per_day <= 55_000, per_day
    assert len({r["harness"] for r in fleet if "harness" in r}) == 12
    assert {sim.project_of(h) for h in sim.harness_names(12)} == set(sim.PROJECTS)


def test_a_tick_every_minute(fleet: list[dict[str, Any]]) -> None:
    ticks = [r["at"] for r in fleet if r["type"] == "tick"]
    assert len(ticks) == DAYS * 1440 - 1  # the very first minute boundary is the start
    assert all(b - a == 60_000 for a, b in itertools.pairwise(ticks))


def _bursts(times: list[int], window: int, size: int) -> int:
    """How many separate times at least ``size`` events fall within ``window``."""
    times = sorted(times)
    count, i = 0, 0
    while i + size - 1 < len(times):
        if times[i + size - 1] - times[i] <= window:
            count += 1
            i += size
        else:
            i += 1
    return count


def test_restart_into_the_same_error_is_planted_on_h05(
    fleet: list[dict[str, Any]], quiet_fleet: list[dict[str, Any]]
) -> None:
    def by_cause(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
        out: dict[tuple[str, str], list[int]] = defaultdict(list)
        for r in rows:
            if r["type"] == "restart":
                out[(r["harness"], r["cause_digest"])].append(r["at"])
        return out

    planted = by_cause(fleet)
    hot = {k: _bursts(v, HOUR, 3) for k, v in planted.items() if _bursts(v, HOUR, 3)}
    assert list(hot) == [("h05", sim.RESTART_CAUSE)]
    assert hot[("h05", sim.RESTART_CAUSE)] == 2  # days 1 and 4 of 0..5
    assert all(_bursts(v, HOUR, 3) == 0 for v in by_cause(quiet_fleet).values())
    assert any(r["type"] == "restart" for r in quiet_fleet)  # background restarts stay


def test_verify_failures_recur_with_one_cause_across_runs(
    fleet: list[dict[str, Any]], quiet_fleet: list[dict[str, Any]]
) -> None:
    def causes(rows: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
        return Counter((r["harness"], r["cause_digest"]) for r in rows
                       if r["type"] == "verify_failed")  # fmt: skip

    planted = causes(fleet)
    recurring = {k for k, n in planted.items() if n >= 3}
    assert recurring == {("h03", sim.VERIFY_CAUSE_A), ("h09", sim.VERIFY_CAUSE_B)}
    runs = {r["run"] for r in fleet if r.get("cause_digest") == sim.VERIFY_CAUSE_A}
    assert len(runs) >= 10
    assert max(causes(quiet_fleet).values()) == 1


def test_loop_guard_trips_recur_on_h06(
    fleet: list[dict[str, Any]], quiet_fleet: list[dict[str, Any]]
) -> None:
    trips = [r for r in fleet if r["type"] == "loop_stopped"]
    assert {r["harness"] for r in trips} == {"h06"}
    assert {r["source"] for r in trips} == {"loopguard"}
    assert sorted({(r["at"] - sim.DEFAULT_START_MS) // DAY for r in trips}) == [1, 3, 5]
    assert len(trips) >= 6
    for trip in trips:
        same = [r for r in fleet if r.get("run") == trip["run"] and r["type"] == "tool_call"
                and r.get("args_digest") == trip["args_digest"]]  # fmt: skip
        assert len(same) >= 8
    assert not any(r["type"] == "loop_stopped" for r in quiet_fleet)


def test_one_shots_exhaust_their_budget_every_night(
    fleet: list[dict[str, Any]], quiet_fleet: list[dict[str, Any]]
) -> None:
    spent = [r for r in fleet if r["type"] == "budget_exhausted"]
    assert Counter(r["harness"] for r in spent) == {"h11": DAYS, "h12": DAYS}
    assert all(2 <= (r["at"] % DAY) // HOUR < 4 for r in spent)
    assert {r["source"] for r in spent} == {"ledger"}
    assert not any(r["type"] == "budget_exhausted" for r in quiet_fleet)
    # The one-shots are otherwise idle: nothing of theirs after 04:00.
    assert not any(r.get("harness") in ("h11", "h12") and r["type"] != "fact_added"
                   and r["type"] != "fact_retracted" and (r["at"] % DAY) >= 4 * HOUR
                   for r in fleet)  # fmt: skip


def test_two_harnesses_collide_on_one_file_and_one_file_churns(
    fleet: list[dict[str, Any]], quiet_fleet: list[dict[str, Any]]
) -> None:
    collisions = [r for r in fleet if r["type"] == "collision"]
    assert {(r["harness"], r["other_harness"], r["path"]) for r in collisions} == {
        ("h02", "h01", sim.COLLISION_PATH)
    }
    assert len(collisions) == 3 * 3  # three rounds on days 0, 2, 4
    churn = [r for r in fleet if r["type"] == "churn"]
    assert {(r["harness"], r["path"], r["n"]) for r in churn} == {("h04", sim.CHURN_PATH, 25)}
    edits = [r for r in fleet if r["type"] == "file_edited" and r["path"] == sim.CHURN_PATH]
    assert len(edits) == 25 * DAYS
    for kind in ("collision", "churn"):
        assert not any(r["type"] == kind for r in quiet_fleet)


def test_facts_and_quiet_stretches(fleet: list[dict[str, Any]]) -> None:
    facts = Counter(r["type"] for r in fleet if r["kind"] == "fact_event")
    assert facts["fact_added"] == 20 * DAYS and facts["fact_retracted"] == 6 * DAYS
    # Every interactive harness has a stretch of at least 8 hours without run events each day.
    for h in sim.harness_names(10):
        times = sorted(r["at"] for r in fleet if r.get("harness") == h and r["kind"] == "run_event")
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert sum(1 for g in gaps if g >= 8 * HOUR) >= DAYS - 1, h


def test_write_fleet_fills_a_store(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    seen: list[int] = []
    result = sim.write_fleet(conn, days=1, harnesses=3, on_batch=seen.append)
    rows = all_rows(conn)
    assert result.admitted == len(rows) == seen[-1]
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    expected = list(sim.iter_fleet_tuples(days=1, harnesses=3))
    assert [tuple(r[1:]) for r in rows] == expected


def test_live_mode_offers_rows_as_their_time_comes(tmp_path: Path) -> None:
    path, conn = store(tmp_path)
    start = sim.DEFAULT_START_MS
    now = [start + 10 * HOUR]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += max(1, int(seconds * 1000))

    result = run_live(path, start_ms=start, harnesses=12, seed=7, clock=lambda: now[0],
                      sleep=sleep, stop=lambda: now[0] >= start + 10 * HOUR + 5 * 60_000,
                      max_sleep_s=5.0)  # fmt: skip
    day0 = sim.day_rows(0, harnesses=12, seed=7, start_ms=start, quiet=False, ticks=False)
    live = [r for r in day0 if r[0] >= start + 10 * HOUR]
    window = [r for r in live if r[0] <= start + 10 * HOUR + 5 * 60_000]
    assert result.offered == result.stats.admitted >= len(window) - 1 > 20
    rows = all_rows(conn)
    events = [r for r in rows if r[2] != "tick"]
    assert [r[2:] for r in events] == [e[1:] for e in live[: len(events)]]
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(rows))


def test_the_fleet_is_busy_around_the_clock_but_each_harness_rests(
    fleet: list[dict[str, Any]],
) -> None:
    calls = [r for r in fleet if r["type"] == "tool_call" and r["at"] >= sim.DEFAULT_START_MS + DAY]
    hours = Counter(((r["at"] % DAY) // HOUR) for r in calls)
    assert set(hours) == set(range(24))  # a live demo at any hour shows activity
    for h in ("h01", "h04", "h09"):
        busy = {(r["at"] % DAY) // HOUR for r in calls if r["harness"] == h}
        assert 8 <= 24 - len(busy) <= 11, h  # ten idle hours, give or take the jitter
