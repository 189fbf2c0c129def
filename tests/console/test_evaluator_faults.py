"""A console acting on a store rides out the store's faults (a crash of the console is a bug).

Before, a store error in the acting evaluator's worker (a disk I/O error, a
lock held past the busy timeout) ended the whole console with a traceback
(Textual's ``WorkerFailed``). Now the evaluator says once that it is paused
and why, retries on a new connection, says when it works again, and only a
store found corrupt twice stops it, with the console still running.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import engine.rules.authority.lifecycle_run as lifecycle_run
from console.app import HarnessConsole
from tests.console.conftest import until
from tests.console.test_acting import _app, _fires, _unevaluated_store


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
