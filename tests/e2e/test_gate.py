"""The gate's guarantees with the real clients (DESIGN "The gate's guarantees", issues 17, 23).

Each test drives a real agent CLI against the fake model API, with its hooks
and OpenTelemetry pointed at a real ``harness serve``, and looks at what an
operator relies on: the side effect a denied call would have left, the
journal's rows, the holds. The hold tests repeat ``HARNESS_E2E_RUNS`` times
(default 20): a race shows as a failure in some runs, never in one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._clients import ClientKit
from tests.e2e._config import CLAUDE_EVENTS, Otlp, command_hooks, http_hooks
from tests.e2e._script import Script, shell, turn, write
from tests.e2e._serve import LOOP_GUARD, E2EServe, start
from tests.e2e.conftest import installed

pytestmark = pytest.mark.e2e
RUNS = int(os.environ.get("HARNESS_E2E_RUNS", "20"))
FAIL = "echo failing; exit 3"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EServe]:
    running = start(tmp_path_factory.mktemp("serve"))
    try:
        yield running
    finally:
        assert running.stop() == 0, running.log.read_text()


def hooks_for(kit: ClientKit, serve: E2EServe, harness: str) -> tuple[object, ...]:
    """The client's hooks at serve: http for Claude Code, ``harness hook AGENT`` for the others."""
    if kit.name == "claude":
        events = [e for e in CLAUDE_EVENTS if e != "SessionStart"]  # never sent to http hooks
        return http_hooks(serve.hook_url(harness), events)
    agent = "codex" if kit.name == "codex" else "gemini"
    return command_hooks(serve.command(agent, harness), kit.events)


def otlp_for(serve: E2EServe, harness: str) -> Otlp:
    return Otlp(serve.url, resource={"harness.id": harness, "harness.project": "e2e"})


def run(
    kit: ClientKit,
    serve: E2EServe,
    base: Path,
    harness: str,
    script: Script,
    *,
    hooks: bool = True,
    otlp: bool = False,
) -> object:
    env = dict(serve.env)
    if kit.name == "codex" and otlp:
        env["OTEL_BLRP_SCHEDULE_DELAY"] = "100"
    return kit.run(
        script,
        base,
        hooks=hooks_for(kit, serve, harness) if hooks else (),
        otlp=otlp_for(serve, harness) if otlp else None,
        env=env,
    )


def held_after_failure(
    kit: ClientKit,
    serve: E2EServe,
    base: Path,
    harness: str,
    *,
    one_message: bool,
    otlp: bool = False,
) -> tuple[bool, str]:
    """(was call k+1 stopped, why not): call k fails, call k+1 would write ``after.txt``."""
    failing, writing = shell(FAIL), shell("printf x > after.txt")
    script = Script.of(turn(failing, writing)) if one_message else Script.of(failing, writing)
    result = run(kit, serve, base, harness, script, otlp=otlp)
    after = result.workdir / "after.txt"  # type: ignore[attr-defined]
    return not after.exists(), f"{harness}: {result.stderr[-400:]}"  # type: ignore[attr-defined]


@pytest.mark.parametrize("one_message", [True, False], ids=["one-message", "consecutive"])
def test_claude_code_a_failure_holds_the_very_next_call(
    serve: E2EServe, tmp_path: Path, one_message: bool
) -> None:
    kit = installed("claude")
    denied = []
    for i in range(RUNS):
        harness = f"once-claude-{'m' if one_message else 'c'}{i}"
        ok, why = held_after_failure(
            kit, serve, tmp_path / str(i), harness, one_message=one_message
        )
        denied.append(ok or why)
    assert denied == [True] * RUNS
    assert serve.metric("harness_serve_events_total", event="gate_late") == 0


@pytest.mark.parametrize("client", ["codex", "gemini"])
def test_codex_and_gemini_a_failure_holds_the_next_message(
    serve: E2EServe, tmp_path: Path, client: str
) -> None:
    # Both run the calls of one message concurrently: the gate can only act between messages.
    # Codex's hooks cannot tell a failure: its OTLP record does, so Codex runs with both on.
    kit = installed(client)
    runs = max(3, RUNS // 4)
    denied = []
    for i in range(runs):
        ok, why = held_after_failure(
            kit,
            serve,
            tmp_path / str(i),
            f"once-{client}-{i}",
            one_message=False,
            otlp=client == "codex",
        )
        denied.append(ok or why)
    assert denied == [True] * runs


def test_codex_over_its_command_hook_alone_a_hold_denies_its_next_shell_call(
    serve: E2EServe, tmp_path: Path
) -> None:
    kit = installed("codex")
    harness = "hold-codex"
    script = Script.of(write("hold-here.txt", "marker\n"), shell("printf x > after.txt"))
    result = run(kit, serve, tmp_path, harness, script)
    assert (result.workdir / "hold-here.txt").exists()  # type: ignore[attr-defined]
    assert not (result.workdir / "after.txt").exists()  # type: ignore[attr-defined]
    (hold,) = serve.holds(harness)
    denied = result.calls[1]  # type: ignore[attr-defined]
    assert f"hold {hold['id']}" in (denied.result or "")


def test_release_frees_the_next_call(serve: E2EServe, tmp_path: Path) -> None:
    kit = installed("claude")
    harness = "once-release"
    ok, why = held_after_failure(kit, serve, tmp_path / "a", harness, one_message=False)
    assert ok, why
    (hold,) = serve.holds(harness)
    serve.cli("holds", "release", str(hold["id"]), "--reason", "checked")
    result = run(kit, serve, tmp_path / "b", harness, Script.of(shell("printf x > freed.txt")))
    assert (result.workdir / "freed.txt").exists()  # type: ignore[attr-defined]


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_after_a_stop_no_tool_of_that_run_runs(
    serve: E2EServe, tmp_path: Path, client: str
) -> None:
    kit = installed(client)
    harness = f"stop-{client}"
    script = Script.of(
        write("stop-here.txt", "marker\n"),
        shell("printf x > after-stop.txt"),
        turn(shell("printf y > also-after.txt"), write("late.txt", "late\n")),
    )
    result = run(kit, serve, tmp_path, harness, script)
    work = result.workdir  # type: ignore[attr-defined]
    assert (work / "stop-here.txt").exists()
    assert not (work / "after-stop.txt").exists(), result.stderr  # type: ignore[attr-defined]
    assert not (work / "also-after.txt").exists()
    assert not (work / "late.txt").exists()
    # a new session of the same harness is a new run: it starts free
    again = run(kit, serve, tmp_path / "again", harness, Script.of(shell("printf z > new.txt")))
    assert (again.workdir / "new.txt").exists()  # type: ignore[attr-defined]


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_hooks_and_otlp_together_one_row_per_call_and_a_twice_rule_needs_two(
    serve: E2EServe, tmp_path: Path, client: str
) -> None:
    kit = installed(client)
    harness = f"twice-{client}"
    script = Script.of(shell("printf a > a.txt"), shell(FAIL), shell("printf b > b.txt"))
    result = run(kit, serve, tmp_path / "one", harness, script, otlp=True)
    work = result.workdir  # type: ignore[attr-defined]
    assert (work / "b.txt").exists()  # one real failure: no hold yet
    calls = serve.rows(harness, "tool_call")
    assert len(calls) == 3, calls
    assert [c["outcome"] for c in calls] == ["ok", "error", "ok"]
    assert serve.holds(harness) == []
    second = Script.of(shell(FAIL), shell("printf c > c.txt"))
    result = run(kit, serve, tmp_path / "two", harness, second, otlp=True)
    assert not (result.workdir / "c.txt").exists()  # type: ignore[attr-defined]
    assert len(serve.holds(harness)) == 1


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_the_loop_guard_trips_at_exactly_loop_guard_real_calls(
    serve: E2EServe, tmp_path: Path, client: str
) -> None:
    kit = installed(client)
    harness = f"loop-{client}"
    same = [shell("printf x >> loop.txt") for _ in range(LOOP_GUARD + 2)]
    result = run(kit, serve, tmp_path, harness, Script.of(*same), otlp=True)
    lines = (result.workdir / "loop.txt").read_text().count("x")  # type: ignore[attr-defined]
    assert lines == LOOP_GUARD  # the guard stops the run at its LOOP_GUARD-th real call
    (trip,) = serve.rows(harness, "loop_stopped")
    assert trip["n"] == LOOP_GUARD
    assert len(serve.rows(harness, "tool_call")) == LOOP_GUARD


def test_codex_over_both_sources_one_row_per_call_the_failed_one_an_error(
    serve: E2EServe, tmp_path: Path
) -> None:
    kit = installed("codex")
    harness = "both-codex"
    script = Script.of(shell("printf a > a.txt"), shell(FAIL), shell("printf b > b.txt"))
    run(kit, serve, tmp_path, harness, script, otlp=True)
    calls = serve.rows(harness, "tool_call")
    assert [(c["outcome"], c["n"]) for c in calls] == [("ok", 0), ("error", 3), ("ok", 0)]


def test_codex_over_otlp_alone_one_row_per_call_a_failure_is_an_error(
    serve: E2EServe, tmp_path: Path
) -> None:
    kit = installed("codex")
    harness = "otlp-codex"
    script = Script.of(shell("printf a > a.txt"), shell(FAIL))
    run(kit, serve, tmp_path, harness, script, hooks=False, otlp=True)
    calls = serve.rows(harness, "tool_call")
    assert [(c["tool"], c["outcome"], c["n"]) for c in calls] == [
        ("Bash", "ok", 0),
        ("Bash", "error", 3),
    ]
    assert len(serve.rows(harness, "run_started")) == 1


def test_a_run_from_http_hooks_alone_has_run_started_and_shows_running(
    serve: E2EServe, tmp_path: Path
) -> None:
    # Claude Code sends no SessionStart to http hooks: run_started comes from the first event.
    import sqlite3
    import threading
    import time

    from engine.views.fleet import fleet_summary

    kit = installed("claude")
    harness = "fleet-claude"
    script = Script.of(shell("printf a > a.txt"), turn(shell("printf b > b.txt"), delay_s=3.0))
    worker = threading.Thread(target=run, args=(kit, serve, tmp_path, harness, script))
    worker.start()
    seen: set[str] = set()
    while worker.is_alive():
        conn = sqlite3.connect(f"file:{serve.store}?mode=ro", uri=True)
        try:
            seen |= {h.state for h in fleet_summary(conn) if h.harness == harness}
        finally:
            conn.close()
        time.sleep(0.1)
    worker.join()
    (started,) = serve.rows(harness, "run_started")
    assert started["run"] and started["project"] == "e2e"
    assert "running" in seen, seen


async def test_a_console_started_during_a_serve_restart_does_not_act_and_serve_takes_it_back(
    tmp_path: Path,
) -> None:
    import asyncio
    import signal
    import sqlite3

    from console.app import HarnessConsole
    from console.context import ConsoleContext
    from engine.config import load_config
    from engine.views.session import ConsoleOptions

    kit = installed("codex")
    first = start(tmp_path / "serve")
    first.proc.send_signal(signal.SIGKILL)  # a crash: its lease row stays behind
    first.proc.wait()
    harness = "restart-codex"
    # Meanwhile Codex works: its command hooks find no serve and journal the call themselves.
    run(kit, first, tmp_path / "during", harness, Script.of(write("hold-here.txt", "x\n")))
    assert len(first.rows(harness, "tool_call")) == 1 and first.holds(harness) == []

    os.environ["HARNESS_CONFIG"] = str(first.config)
    try:
        options = ConsoleOptions(store_path=first.store, act=False, config=load_config())
        app = HarnessConsole(ConsoleContext(options, cursor_blink=False), watch_files=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause(2.0)  # a console that would act has taken over by now
            conn = sqlite3.connect(f"file:{first.store}?mode=ro", uri=True)
            try:
                holder, role = conn.execute(
                    "SELECT holder, role FROM evaluator_lease WHERE id = 1"
                ).fetchone()
                fires = conn.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0]
            finally:
                conn.close()
            assert (
                holder.startswith("serve@") and role == "serve"
            )  # the dead serve's row, untouched
            assert fires == 0 and first.holds(harness) == []  # the console acted on nothing
            again = await asyncio.to_thread(start, tmp_path / "serve", port=first.port)
            try:
                deadline = asyncio.get_running_loop().time() + 20
                while not again.holds(harness):  # serve takes the lease back, then the backlog
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.2)
                result = await asyncio.to_thread(
                    run, kit, again, tmp_path / "after", harness, Script.of(shell("printf x > a"))
                )
                assert not (result.workdir / "a").exists()  # type: ignore[attr-defined]
            finally:
                assert again.stop() == 0
    finally:
        del os.environ["HARNESS_CONFIG"]
