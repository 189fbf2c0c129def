"""FaultRide: an acting evaluator's way through store faults (serve's and the console's)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.rules.authority.recovery import FaultRide, Reconnect
from engine.store.db import StoreMissing, connect

FAST = (0.001, 0.004)


def attempts(*outcomes: BaseException | None) -> tuple[Callable[[], None], list[int]]:
    """An attempt that raises each outcome in turn (None: it returns)."""
    calls = [0]

    def attempt() -> None:
        outcome = outcomes[calls[0]]
        calls[0] += 1
        if outcome is not None:
            raise outcome

    return attempt, calls


def ride(said: list[str]) -> FaultRide:
    return FaultRide(
        threading.Event(),
        on_fault=said.append,
        on_recovered=lambda: said.append("recovered"),
        backoff_s=FAST,
    )


def test_store_errors_end_attempts_not_the_ride_and_recovery_is_said_once() -> None:
    said: list[str] = []
    r = ride(said)
    io = sqlite3.OperationalError("disk I/O error")
    attempt, calls = attempts(io, sqlite3.OperationalError("database is locked"), None)
    r.run(attempt)
    assert calls[0] == 3
    assert said == ["disk I/O error", "database is locked"]
    r.working()
    r.working()
    assert said[-1] == "recovered" and said.count("recovered") == 1


def test_a_store_corrupt_on_two_attempts_in_a_row_ends_the_ride() -> None:
    said: list[str] = []
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    attempt, calls = attempts(malformed, malformed, None)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        ride(said).run(attempt)
    assert calls[0] == 2 and said == ["database disk image is malformed"]


def test_an_attempt_that_worked_between_two_corrupt_ones_keeps_the_ride_going() -> None:
    said: list[str] = []
    r = ride(said)
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    calls = [0]

    def attempt() -> None:
        calls[0] += 1
        if calls[0] == 2:
            r.working()  # a new connection worked, then met the fault again
        if calls[0] < 3:
            raise malformed

    r.run(attempt)
    assert calls[0] == 3


def test_errors_that_are_not_the_stores_leave_at_once() -> None:
    said: list[str] = []
    rule_error = InputError("rule x: no such field")
    attempt, calls = attempts(rule_error, None)
    with pytest.raises(InputError):
        ride(said).run(attempt)
    assert calls[0] == 1 and said == []
    attempt, calls = attempts(sqlite3.InterfaceError("bad parameter type"), None)
    with pytest.raises(sqlite3.InterfaceError):
        ride(said).run(attempt)
    assert said == []


def test_a_store_error_wrapped_as_input_error_is_a_store_fault() -> None:
    """connect() names the store in an InputError; the SQLite error behind it decides."""
    said: list[str] = []
    try:
        raise sqlite3.OperationalError("unable to open database file")
    except sqlite3.OperationalError:
        try:
            raise InputError("j.db: cannot open the store")
        except InputError as wrapped:
            opened = wrapped
    attempt, calls = attempts(opened, None)
    ride(said).run(attempt)
    assert calls[0] == 2 and said == ["unable to open database file"]


def test_reconnect_starts_again_at_once_without_a_fault() -> None:
    said: list[str] = []
    attempt, calls = attempts(Reconnect(), None)
    ride(said).run(attempt)
    assert calls[0] == 2 and said == []


def test_a_stopped_ride_runs_nothing() -> None:
    stop = threading.Event()
    stop.set()
    attempt, calls = attempts(None)
    FaultRide(stop).run(attempt)
    assert calls[0] == 0


def test_a_missing_store_is_an_error_at_first_and_a_fault_once_it_worked(tmp_path: Path) -> None:
    """Never there: the operator's mistake, said at once. There before: its disk is away."""
    gone = tmp_path / "gone.db"
    with pytest.raises(StoreMissing) as caught:
        connect(gone, create=False)
    missing = caught.value
    said: list[str] = []
    attempt, calls = attempts(missing, None)
    with pytest.raises(StoreMissing):
        ride(said).run(attempt)
    assert calls[0] == 1 and said == []

    r = ride(said)
    r.working()
    attempt, calls = attempts(missing, None)
    r.run(attempt)
    assert calls[0] == 2 and len(said) == 1 and "no store here" in said[0]
