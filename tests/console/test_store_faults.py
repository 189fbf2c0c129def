"""A console rides out its store's faults (a crash of the console is a bug).

Before, a store error in a worker (the acting evaluator's, or a pane's read:
a disk I/O error, a lock held past the busy timeout, a corrupt page) ended the
whole console with a traceback (Textual's ``WorkerFailed``). Now the
evaluator says once that it is paused and why, retries on a new connection,
says when it works again, and only a store found corrupt twice stops it; a
pane shows the error naming the store and reads again on its next refresh.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import engine.rules.authority.lifecycle_run as lifecycle_run
from console.app import HarnessConsole
from console.panes.fleet import FleetPane
from engine.errors import HarnessError
from engine.views.session import store_session
from tests.console.conftest import until
from tests.console.test_acting import _app, _fires, _unevaluated_store
from tests.serve._faultfs import ext4_loop


def failing_steps(monkeypatch: pytest.MonkeyPatch, error: sqlite3.Error, times: int) -> list[int]:
    """The live evaluator's first ``times`` steps raise ``error``; returns the step count."""
    real = lifecycle_run.open_live
    steps = [0]

    class Failing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def step(self, max_rows: int | None = None) -> object:
            steps[0] += 1
            if steps[0] <= times:
                raise error
            return self.inner.step(max_rows)

    def open_live(*args: Any, **kwargs: Any) -> Any:
        evaluator, policy = real(*args, **kwargs)
        return Failing(evaluator), policy

    monkeypatch.setattr(lifecycle_run, "open_live", open_live)
    return steps


def said(app: HarnessConsole, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every notification title the app shows from now on, in order."""
    titles: list[str] = []
    notify = app.notify

    def recording(message: str, *, title: str = "", **kwargs: Any) -> None:
        titles.append(title)
        notify(message, title=title, **kwargs)

    monkeypatch.setattr(app, "notify", recording)
    return titles


async def test_a_store_error_pauses_the_evaluator_and_it_resumes(
    tmp_path: Path, policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = failing_steps(monkeypatch, sqlite3.OperationalError("disk I/O error"), times=3)
    store, _rows = _unevaluated_store(tmp_path)
    app = _app(store, policy_dir, act=True)
    titles = said(app, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: _fires(store) > 0)
        await until(pilot, lambda: "Evaluator resumed" in titles)
        assert app.is_running
        assert steps[0] > 3
        assert titles.count("Evaluator paused: store error") == 1  # once, not per retry
        assert titles.index("Evaluator paused: store error") < titles.index("Evaluator resumed")


async def test_a_corrupt_store_stops_the_evaluator_not_the_console(
    tmp_path: Path, policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    malformed = sqlite3.DatabaseError("database disk image is malformed")
    steps = failing_steps(monkeypatch, malformed, times=10**6)
    store, _rows = _unevaluated_store(tmp_path)
    app = _app(store, policy_dir, act=True)
    titles = said(app, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: any(t.startswith("Evaluator stopped") for t in titles))
        await pilot.pause(0.5)
        assert app.is_running
        assert steps[0] == 2  # corrupt on two connections in a row: no more attempts
        assert _fires(store) == 0


async def test_a_store_error_in_a_pane_read_is_shown_and_the_pane_reads_again(
    tmp_path: Path, policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = FleetPane.read
    reads = [0]

    def read(self: FleetPane, conn: sqlite3.Connection) -> Any:
        reads[0] += 1
        if reads[0] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, conn)

    monkeypatch.setattr(FleetPane, "read", read)
    store, _rows = _unevaluated_store(tmp_path)
    app = _app(store, policy_dir, act=False)
    titles = said(app, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: "Bad store" in titles)
        await pilot.press("r")  # read again: the store answers now
        await until(pilot, lambda: reads[0] >= 2)
        assert app.is_running
        assert [t for t in titles if t == "Bad store"] == ["Bad store"]


def test_a_store_session_turns_a_store_error_into_one_naming_the_store(tmp_path: Path) -> None:
    store, _rows = _unevaluated_store(tmp_path)
    with pytest.raises(HarnessError) as caught, store_session(store) as conn:
        conn.execute("SELECT 1")
        raise sqlite3.OperationalError("disk I/O error")
    assert str(store) in str(caught.value) and "disk I/O error" in str(caught.value)
    with pytest.raises(ZeroDivisionError), store_session(store):
        raise ZeroDivisionError  # not the store's: passes through untouched


async def test_an_acting_console_rides_out_a_disk_that_goes_and_comes_back(
    tmp_path: Path, policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real fault: the store's ext4 disk answers EIO, then the same bytes are mounted anew."""
    with ext4_loop(tmp_path) as fs:
        store, _rows = _unevaluated_store(fs.where)
        app = _app(store, policy_dir, act=True)
        titles = said(app, monkeypatch)
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, lambda: _fires(store) > 0)
            fs.shutdown()
            await until(pilot, lambda: "Evaluator paused: store error" in titles)
            fs.remount_fresh()
            await until(pilot, lambda: "Evaluator resumed" in titles)
            assert app.is_running
            assert _fires(store) > 0  # the store at the path, read anew
