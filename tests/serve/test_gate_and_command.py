"""The gate never guesses (503 on a store error), and the command hook is the same handler."""

from __future__ import annotations

import asyncio
import json
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from engine.config import HarnessConfig
from engine.rules.authority.holds import create_hold
from engine.serve.app import build_app
from engine.serve.metrics import ServeMetrics
from engine.serve.runtime import ServeRuntime
from engine.store.db import connect
from tests.serve.conftest import ROOT, fixture, serve_env


def test_store_error_is_503_with_reason_and_counted(tmp_path: Path) -> None:
    runtime = ServeRuntime(tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), evaluate=False)
    broken = sqlite3.connect(":memory:", check_same_thread=False)
    broken.close()
    runtime.hooks.gate.reader = lambda: broken  # type: ignore[attr-defined]
    runtime.start()

    async def go() -> tuple[int, str, int, str]:
        app = build_app(runtime, token=None, max_body=65536)
        async with TestClient(TestServer(app)) as client:
            resp = await client.post("/hooks/claude-code?harness=g01", json=fixture("PreToolUse"))
            post = await client.post("/hooks/claude-code?harness=g01", json=fixture("Notification"))
            return resp.status, await resp.text(), post.status, await post.text()

    try:
        status, text, post_status, _ = asyncio.run(go())
    finally:
        runtime.close()
    assert status == 503 and "cannot read" in text and "closed database" in text
    assert post_status == 503  # a run's stop cannot be read either: never "free" by guess
    assert runtime.metrics.totals["gate_errors"] == 2
    conn = connect(tmp_path / "j.db")
    counters = dict(conn.execute("SELECT name, value FROM journal_counters"))
    assert counters.get("serve_gate_errors") == 2
    conn.close()
    doctor = subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", "doctor", "--store", str(tmp_path / "j.db")],
        capture_output=True,
        text=True,
        env=serve_env(tmp_path),
        timeout=60,
        cwd=ROOT,
    )
    assert "2 gate answer(s) failed on a store error" in doctor.stdout + doctor.stderr


def test_a_store_that_cannot_be_opened_is_503_never_500(tmp_path: Path) -> None:
    """The gate's reader cannot open the store (its disk is away), then a raw store error."""
    runtime = ServeRuntime(tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), evaluate=False)

    def cannot_open() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    runtime.hooks.gate.reader = cannot_open  # type: ignore[attr-defined]
    runtime.start()

    async def go() -> list[tuple[int, str, str | None]]:
        app = build_app(runtime, token=None, max_body=65536)
        out = []
        async with TestClient(TestServer(app)) as client:
            resp = await client.post("/hooks/claude-code?harness=g02", json=fixture("PreToolUse"))
            out.append((resp.status, await resp.text(), resp.headers.get("Retry-After")))

            def raw(*_: object, **__: object) -> object:
                raise sqlite3.OperationalError("disk I/O error")

            runtime.hooks.handle = raw  # type: ignore[method-assign]
            resp = await client.post("/hooks/claude-code?harness=g02", json=fixture("PreToolUse"))
            out.append((resp.status, await resp.text(), resp.headers.get("Retry-After")))
        return out

    try:
        answers = asyncio.run(go())
    finally:
        runtime.close()
    (status, text, _), (raw_status, raw_text, retry) = answers
    assert status == 503 and "unable to open" in text
    assert raw_status == 503 and "disk I/O error" in raw_text and retry


def run_hook(
    env: dict[str, str], store: Path, payload: object, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.harness",
            "hook",
            "claude-code",
            "--store",
            str(store),
            *extra,
        ],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )


def test_command_hook_journals_and_answers_from_holds(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    store = tmp_path / "j.db"
    assert run_hook(env, store, fixture("SessionStart"), "--harness", "c01").stdout == "{}\n"
    post = run_hook(env, store, fixture("PostToolUse"), "--harness", "c01", "--project", "atlas")
    assert post.returncode == 0 and json.loads(post.stdout) == {}
    conn = connect(store)
    rows = conn.execute(
        "SELECT type, harness, project, run, tool, path FROM rule_journal "
        "WHERE kind != 'tick' ORDER BY seq"
    ).fetchall()
    run = fixture("PostToolUse")["session_id"]
    assert rows == [
        ("run_started", "c01", None, run, None, None),
        ("tool_call", "c01", "atlas", run, "Edit", "/home/dev/src/atlas/src/parser.py"),
        ("file_edited", "c01", "atlas", run, None, "/home/dev/src/atlas/src/parser.py"),
    ]
    conn.execute("BEGIN IMMEDIATE")
    hold = create_hold(
        conn,
        harness="c01",
        fire_id=None,
        rule="r1",
        hash_="h",
        event_seq=2,
        seq=2,
        at=1,
        reason="rule_hold: rule `r1` fired at seq 2: c01 edited",
    )
    conn.execute("COMMIT")
    conn.close()
    pre = run_hook(env, store, fixture("PreToolUse"), "--harness", "c01")
    answer = json.loads(pre.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    release = f"harness holds release --store {store} {hold.id}"
    assert answer["permissionDecisionReason"] == (
        f"held by rule r1 (hold {hold.id}): c01 edited; release: {release}"
    )
    other = run_hook(env, store, fixture("PreToolUse"), "--harness", "c02")
    assert other.stdout == "{}\n"
    # The release command works as printed (the store is not the default one, so it names it).
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", *shlex.split(release)[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert run_hook(env, store, fixture("PreToolUse"), "--harness", "c01").stdout == "{}\n"


def test_command_hook_loop_guard_across_processes(tmp_path: Path) -> None:
    env = serve_env(tmp_path, "[serve]\nloop_guard = 3\n")
    store = tmp_path / "j.db"
    call = fixture("PostToolUse")
    outs = [json.loads(run_hook(env, store, call, "--harness", "c03").stdout) for _ in range(3)]
    assert outs[:2] == [{}, {}] and outs[2]["continue"] is False
    assert "loop guard" in outs[2]["stopReason"]
    pre = json.loads(run_hook(env, store, fixture("PreToolUse"), "--harness", "c03").stdout)
    assert pre["continue"] is False
    fresh = dict(fixture("PreToolUse"), session_id="another-session")
    assert run_hook(env, store, fresh, "--harness", "c03").stdout == "{}\n"


def test_command_hook_bad_input_never_exits_2(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.harness",
            "hook",
            "claude-code",
            "--store",
            str(tmp_path / "j.db"),
            "--harness",
            "c04",
        ],
        input="{not json",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert bad.returncode == 1 and "not JSON" in bad.stderr
    nostore = run_hook(env, tmp_path, fixture("PreToolUse"), "--harness", "c04")
    assert nostore.returncode == 1 and "Traceback" not in nostore.stderr


def test_command_hook_imports_only_what_it_needs(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    stdin = json.dumps(fixture("PreToolUse")).encode()
    argv = ["hook", "claude-code", "--harness", "h09", "--store", str(tmp_path / "j.db")]
    heavy = [
        "aiohttp",
        "textual",
        "rich",
        "google",
        "opentelemetry",
        "celpy",
        "cel_expr_python",
        "yaml",
        "ruamel",
    ]
    code = (
        "import sys, io, json\n"
        "from engine.cli.harness import main\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({stdin!r}))\n"
        f"rc = main({argv!r})\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy}), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT
    )
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report == {"rc": 0, "heavy": []}


def test_a_hook_whose_rows_cannot_be_stored_is_503_and_leaves_nothing(tmp_path: Path) -> None:
    runtime = ServeRuntime(
        tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), queue_capacity=1, evaluate=False
    )
    runtime.start()

    async def go() -> list[tuple[int, str]]:
        app = build_app(runtime, token=None, max_body=65536)
        out = []
        async with TestClient(TestServer(app)) as client:
            for i in range(2):  # run_started + tool_call: two rows where only one fits
                call = dict(fixture("PostToolUse"), tool_name="Bash", tool_input={"i": i})
                resp = await client.post("/hooks/claude-code?harness=q02", json=call)
                out.append((resp.status, await resp.text()))
        return out

    try:
        answers = asyncio.run(go())
    finally:
        runtime.close()
    assert [status for status, _ in answers] == [503, 503]
    assert "admission queue full" in answers[0][1]
    assert runtime.metrics.totals["store_unavailable"] == 2
    conn = connect(tmp_path / "j.db")
    rows = conn.execute("SELECT COUNT(*) FROM rule_journal WHERE kind != 'tick'").fetchone()[0]
    counters = dict(conn.execute("SELECT name, value FROM journal_counters"))
    conn.close()
    assert rows == 0
    assert counters.get("serve_store_unavailable") == 2
