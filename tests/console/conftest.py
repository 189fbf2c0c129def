"""Fixtures for console tests: a real store built by the engine, apps with a pinned clock.

The store is made once per session the way production makes it (the
simulator writes two days, the lifecycle-wired evaluator runs over them with
the demo's in-memory enforce entry and its shadowed override), then copied
per test so a test that releases a hold cannot disturb another. Snapshots are
written under ``snapshots/`` at the repository root.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path, PurePath
from typing import Any

import pytest
from pytest_textual_snapshot import SVGImageExtension
from syrupy.assertion import SnapshotAssertion
from textual.pilot import Pilot

from console.app import HarnessConsole
from console.context import ConsoleContext
from engine.config import HarnessConfig
from engine.fleet.sim import DAY_MS, HOUR_MS, MINUTE_MS
from engine.store.db import connect
from engine.views.live import demo_config, write_demo_policy
from engine.views.rules import load_console_rules
from engine.views.session import ConsoleOptions
from tests.conftest import ROOT

#: A fixed UTC midnight (2026-03-01). The history stops on day 1 at 14:05, after
#: restart_same_error held h05 and before its hour-long window lets the hold go.
START_MS = 1_772_323_200_000
DAYS = 2
END_MS = START_MS + DAY_MS + 14 * HOUR_MS + 5 * MINUTE_MS
SNAPSHOTS = ROOT / "snapshots"

SPEC_TEXT = """\
# A small skill spec for console tests (comments must survive a save).
schema: skillspec/v0
id: console.demo
title: Console demo skill
description: Routes PDF work.

routes:
  - id: inspect_pdf
    label: Inspect the PDF
    rank: 1
    description: Look at the PDF first.
  - id: fill_pdf_form
    label: Fill the form
    rank: 2
    description: Fill a form.

rules:
  # form requests go to the form route
  - id: form_requests_fill
    when:
      user_says_any: ["fill this form", "fill the form"]
    prefer: fill_pdf_form
    forbid: [guess_field_names]
    reason: Form work uses the fill route.

tests:
  - name: form request fills
    input: please fill this form
    expect:
      route: fill_pdf_form
# trailing comment
"""


def _build_store(root: Path) -> tuple[Path, Path]:
    from engine.fleet.sim import write_fleet
    from engine.rules.authority.lifecycle_run import open_live

    store = root / "journal.db"
    policy = write_demo_policy(root / "policy")
    conn = connect(store)
    write_fleet(conn, days=DAYS, start_ms=START_MS, end_ms=END_MS, validate=False)
    config = demo_config(HarnessConfig())
    rules = load_console_rules(config, policy).rules
    evaluator, _policy = open_live(conn, rules, config)
    evaluator.run_until_idle()
    conn.close()
    return store, policy


@pytest.fixture(scope="session")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _build_store(tmp_path_factory.mktemp("built"))


@pytest.fixture
def store(built_store: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the built store (WAL checkpointed into the main file)."""
    src, _policy = built_store
    conn = connect(src)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    dst = tmp_path / "journal.db"
    shutil.copy(src, dst)
    return dst


@pytest.fixture
def policy_dir(built_store: tuple[Path, Path], tmp_path: Path) -> Path:
    dst = tmp_path / "policy"
    shutil.copytree(built_store[1], dst)
    return dst


@pytest.fixture
def spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "specs" / "skill.spec.yml"
    path.parent.mkdir()
    path.write_text(SPEC_TEXT, encoding="utf-8")
    return path


AppFactory = Callable[..., HarnessConsole]


@pytest.fixture
def make_app(store: Path, policy_dir: Path) -> AppFactory:
    """Build an app on the copied store; keyword args tune the context and app."""

    def factory(
        *,
        specs: tuple[str, ...] = (),
        initial: str = "fleet",
        live: bool = True,
        watch_files: bool = False,
        evaluate: bool = False,
        policy: Path | None = None,
        config: HarnessConfig | None = None,
        store_path: Path | None = None,
        clock_ms: int = END_MS,
    ) -> HarnessConsole:
        options = ConsoleOptions(
            store_path=store_path or store,
            spec_globs=specs,
            policy_dir=policy or policy_dir,
            config=config or demo_config(HarnessConfig()),
        )
        context = ConsoleContext(
            options,
            clock=lambda: clock_ms,
            poll_interval=0.05,
            refresh_interval=0.5,
            live=live,
            evaluate=evaluate,
            cursor_blink=False,
            label="test store",
        )
        return HarnessConsole(context, initial=initial, watch_files=watch_files)

    return factory


class RootSnapshotExtension(SVGImageExtension):
    """pytest-textual-snapshot's SVG extension, storing files under ``snapshots/``."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
def snap_compare(snapshot: SnapshotAssertion) -> Callable[..., bool]:
    """Like the plugin's ``snap_compare``, but the SVGs live in ``snapshots/``."""
    from textual._doc import take_svg_screenshot

    snap = snapshot.use_extension(RootSnapshotExtension)

    def compare(
        app: HarnessConsole | str | PurePath,
        press: Iterable[str] = (),
        terminal_size: tuple[int, int] = (120, 36),
        run_before: Callable[[Any], Awaitable[None] | None] | None = None,
    ) -> bool:
        assert isinstance(app, HarnessConsole)
        svg = take_svg_screenshot(
            app=app, press=press, terminal_size=terminal_size, run_before=run_before
        )
        return bool(snap == svg)

    return compare


async def until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Let the app run until ``predicate()`` holds, or fail after ``timeout`` seconds.

    Console tests wait for a state instead of sleeping a fixed time: CI machines are loaded,
    and a pause long enough here is too short there. The timeout only bounds a real hang.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await pilot.pause(0.05)
