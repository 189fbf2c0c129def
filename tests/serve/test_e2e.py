"""End to end over HTTP: an enforced hold fires from hook traffic and the gate denies, then frees.

Also: another harness is never affected; a stop-level rule stops one run;
8 identical calls trip the loop guard for that run only, and a new session
starts free.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.serve.conftest import Serve, fixture


def payload(event: str, session: str, **fields: object) -> dict[str, object]:
    base = fixture(event)
    base["session_id"] = session
    base.update(fields)
    return base


def pre(serve: Serve, harness: str, session: str) -> object:
    status, answer = serve.hook(payload("PreToolUse", session), harness)
    assert status == 200, answer
    return answer


def wait_answer(serve: Serve, harness: str, session: str, want: str) -> object:
    deadline = time.monotonic() + 15
    answer: object = None
    while time.monotonic() < deadline:
        answer = pre(serve, harness, session)
        if want in json.dumps(answer):
            return answer
        time.sleep(0.1)
    raise AssertionError(f"no {want!r} answer: {answer}")


def test_hold_denies_until_released_and_spares_other_harnesses(serve: Serve) -> None:
    assert serve.hook(payload("SessionStart", "run-a"), "e01") == (200, {})
    assert pre(serve, "e01", "run-a") == {}
    forbidden = payload("PostToolUse", "run-a", tool_name="Forbidden", tool_input={"x": 1})
    assert serve.hook(forbidden, "e01") == (200, {})
    answer = wait_answer(serve, "e01", "run-a", "deny")
    out = answer["hookSpecificOutput"]  # type: ignore[index]
    assert out["hookEventName"] == "PreToolUse"
    assert out["permissionDecision"] == "deny"
    listed = json.loads(
        serve.harness_cli("holds", "list", "--store", str(serve.store), "--json").stdout
    )
    holds = [
        h
        for h in (listed if isinstance(listed, list) else listed["holds"])
        if h["harness"] == "e01"
    ]
    assert len(holds) == 1
    hold_id = holds[0]["id"]
    reason = out["permissionDecisionReason"]
    assert reason.startswith(f"held by rule serve_test_hold (hold {hold_id}): e01 ran Forbidden")
    assert reason.endswith(f"; release: harness holds release --store {serve.store} {hold_id}")
    # UserPromptSubmit gets its own answer format.
    status, blocked = serve.hook(payload("UserPromptSubmit", "run-a"), "e01")
    assert status == 200 and blocked["decision"] == "block"  # type: ignore[index]
    assert f"hold {hold_id}" in blocked["reason"]  # type: ignore[index]
    # A new session of a held harness is still held (holds outlive runs).
    assert "deny" in json.dumps(pre(serve, "e01", "run-b"))
    # Another harness is never affected.
    assert pre(serve, "e02", "run-c") == {}
    released = serve.harness_cli(
        "holds", "release", str(hold_id), "--store", str(serve.store), "--reason", "checked"
    )
    assert released.returncode == 0, released.stderr
    assert pre(serve, "e01", "run-a") == {}


def test_stop_rule_stops_that_run_only(serve: Serve) -> None:
    halt = payload("PostToolUse", "run-s1", tool_name="Halt", tool_input={})
    assert serve.hook(halt, "s01")[0] == 200
    answer = wait_answer(serve, "s01", "run-s1", "continue")
    assert answer["continue"] is False  # type: ignore[index]
    assert answer["stopReason"].startswith("stopped by rule serve_test_stop (run run-s1")  # type: ignore[index]
    # every later call of that run, whatever the event
    _, post = serve.hook(payload("PostToolUse", "run-s1"), "s01")
    assert post["continue"] is False  # type: ignore[index]
    assert pre(serve, "s01", "run-s2") == {}


def test_loop_guard_stops_the_run_after_eight_identical_calls(serve: Serve) -> None:
    call = payload("PostToolUse", "run-l1", tool_name="Bash", tool_input={"command": "make test"})
    answers = [serve.hook(call, "l01")[1] for _ in range(8)]
    assert answers[:7] == [{}] * 7
    assert answers[7]["continue"] is False  # type: ignore[index]
    assert "loop guard" in answers[7]["stopReason"]  # type: ignore[index]
    assert pre(serve, "l01", "run-l1")["continue"] is False  # type: ignore[index]
    assert pre(serve, "l01", "run-l2") == {}
    assert pre(serve, "l02", "run-l1") == {}
    rows = serve.wait_rows(1, "type = 'loop_stopped' AND harness = 'l01'")
    assert len(rows) == 1
    trip = rows[0]
    assert (trip["source"], trip["run"], trip["tool"], trip["n"]) == (
        "loopguard",
        "run-l1",
        "Bash",
        8,
    )
    calls = serve.rows("type = 'tool_call' AND harness = 'l01'")
    assert len(calls) == 8 and len({c["args_digest"] for c in calls}) == 1
    assert trip["args_digest"] == calls[0]["args_digest"]


def test_a_broken_streak_does_not_trip(serve: Serve) -> None:
    for i in range(12):
        cmd = "make test" if i % 7 else "make lint"
        call = payload("PostToolUse", "run-b1", tool_name="Bash", tool_input={"command": cmd})
        assert serve.hook(call, "b01") == (200, {})


def test_sigterm_drains_the_queue_and_releases_the_lease_within_5s(tmp_path: Path) -> None:
    import sqlite3

    from tests.serve.conftest import start_serve

    server = start_serve(tmp_path)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # the evaluator takes the lease shortly after start
            health = json.loads(server.request("/healthz")[1])
            if health["acting"] and health["holder"].startswith("serve@"):
                break
            time.sleep(0.05)
        for i in range(20):
            call = payload("PostToolUse", "run-q", tool_name="Bash", tool_input={"i": i})
            assert server.hook(call, "q01") == (200, {})
        t0 = time.monotonic()
        code = server.stop()
        elapsed = time.monotonic() - t0
    finally:
        server.stop()
    assert code == 0 and elapsed < 5.0, (code, elapsed)
    conn = sqlite3.connect(server.store)
    try:
        assert conn.execute("SELECT COUNT(*) FROM evaluator_lease").fetchone()[0] == 0
        calls = conn.execute(
            "SELECT COUNT(*) FROM rule_journal WHERE harness = 'q01' AND type = 'tool_call'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert calls == 20
    assert "stopped; " in server.log.read_text()
