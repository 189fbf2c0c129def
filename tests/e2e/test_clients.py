"""Each real client against a fake model API: tool calls run, hooks see them, OTLP reports them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kit import (
    ClientKit,
    Otlp,
    Receiver,
    RecordingHook,
    Script,
    command_hooks,
    shell,
    turn,
    write,
)

pytestmark = pytest.mark.e2e


def test_a_scripted_shell_calls_run(kit: ClientKit, tmp_path: Path) -> None:
    script = Script.of(
        shell("printf 'OUT%s' MARK_a1 > a.txt"), turn(shell("printf b > b.txt"), delay_s=0.3)
    )

    run = kit.run(script, tmp_path).check()

    assert (run.workdir / "a.txt").read_text() == "OUTMARK_a1"
    assert (run.workdir / "b.txt").read_text() == "b"
    first, second = run.calls
    assert first.result is not None and first.result_at is not None
    assert first.result_at > first.sent_at
    assert second.sent_at - first.result_at >= 0.3  # the scripted "thinking" time
    assert run.recording.turns_played == 3  # two calls, then the closing "done"
    assert run.recording.extra_requests == 0
    assert len(run.recording.main_requests) == 3


def _spans(workdir: Path) -> dict[str, tuple[float, float]]:
    """Each step's (start, end) wall time, as the steps wrote them to ``t``."""
    times: dict[str, float] = {}
    for line in (workdir / "t").read_text().split("\n"):
        if line:
            name, at = line.split()
            times[name] = float(at)
    return {step: (times[f"{step}-start"], times[f"{step}-end"]) for step in ("A", "B")}


def _step(name: str) -> str:
    return f"date +{name}-start\\ %s.%N >> t; sleep 0.3; date +{name}-end\\ %s.%N >> t"


def test_b_two_calls_in_one_message_both_run(
    kit: ClientKit, tmp_path: Path, hook: RecordingHook
) -> None:
    """Claude Code runs the calls of one message one after the other, hooks included;
    Codex and Gemini CLI start them together (their PreToolUse/BeforeTool hooks both
    fire before either call ends)."""
    script = Script.of(turn(shell(_step("A")), shell(_step("B"))))
    hooks = command_hooks(hook.command, (kit.pre_tool, kit.post_tool))

    run = kit.run(script, tmp_path, hooks=hooks).check()

    spans = _spans(run.workdir)
    assert [c.turn for c in run.calls] == [0, 0]
    assert all(c.result is not None for c in run.calls)
    order = [
        (p["hook_event_name"], "A" if "A-start" in p["tool_input"]["command"] else "B")
        for p in hook.payloads()
    ]
    if kit.name == "claude":
        assert spans["A"][1] <= spans["B"][0]
        assert order == [
            (kit.pre_tool, "A"),
            (kit.post_tool, "A"),
            (kit.pre_tool, "B"),
            (kit.post_tool, "B"),
        ]
    else:
        assert max(spans["A"][0], spans["B"][0]) < min(spans["A"][1], spans["B"][1])
        assert {e for e, _ in order[:2]} == {kit.pre_tool}
        assert {e for e, _ in order[2:]} == {kit.post_tool}


# What each client's hooks report for a shell call, a write and a shell call exiting 3.
EXPECTED_EVENTS = {
    "claude": [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolBatch",
        "PreToolUse",
        "PostToolUse",
        "PostToolBatch",
        "PreToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "Stop",
        "SessionEnd",
    ],
    "codex": [
        "SessionStart",
        "UserPromptSubmit",
        *["PreToolUse", "PostToolUse"] * 3,
        "Stop",
        "SessionEnd",
    ],
    "gemini": [
        "SessionStart",
        "BeforeAgent",
        *["BeforeTool", "AfterTool"] * 3,
        "AfterAgent",
        "SessionEnd",
    ],
}


def _hook_view(kit: ClientKit, name: str, tool_input: dict[str, Any]) -> tuple[str, Any]:
    """The tool name and input the client's hooks report for a call the fake sent."""
    if kit.name == "codex":
        key = "cmd" if name == "exec_command" else "input"
        return ("Bash" if name == "exec_command" else name), {"command": tool_input[key]}
    return name, tool_input


def test_c_hooks_receive_the_payloads(kit: ClientKit, tmp_path: Path, hook: RecordingHook) -> None:
    script = Script.of(
        shell("printf 'OUT%s' MARK_c1 > c.txt  # CMDMARK_c"),
        write("w.txt", "WRITEMARK_c\n"),
        shell("echo FAILMARK_c; exit 3"),
    )

    run = kit.run(script, tmp_path, hooks=command_hooks(hook.command, kit.events)).check()

    payloads = hook.payloads()
    assert [p["hook_event_name"] for p in payloads] == EXPECTED_EVENTS[kit.name]
    workdir = os.path.realpath(run.workdir)
    assert {p["session_id"] for p in payloads} == {payloads[0]["session_id"]}
    assert all(os.path.realpath(p["cwd"]) == workdir for p in payloads)
    assert all(p["transcript_path"] for p in payloads)
    prompt = hook.payloads(kit.prompt_event)[0]["prompt"]
    assert "PROMPTMARK_e2e0" in prompt
    pres = hook.payloads(kit.pre_tool)
    assert [(p["tool_name"], p["tool_input"]) for p in pres] == [
        _hook_view(kit, c.name, dict(c.input)) for c in run.calls
    ]
    if kit.name == "gemini":
        assert all("tool_use_id" not in p for p in payloads)  # Gemini has no call ids
    else:
        assert [p["tool_use_id"] for p in pres] == [c.call_id for c in run.calls]
    [failure] = [
        p
        for p in payloads
        if "FAILMARK_c" in str(p.get("tool_input"))
        and p["hook_event_name"] in (kit.post_tool, "PostToolUseFailure")
    ]
    _check_failure_report(kit, failure)


def _check_failure_report(kit: ClientKit, report: dict[str, Any]) -> None:
    """How each client's hooks report a shell call that exited 3."""
    assert "FAILMARK_c" in str(report)
    if kit.name == "claude":
        assert report["hook_event_name"] == "PostToolUseFailure"
        assert report["error"].startswith("Exit code 3")
    elif kit.name == "codex":  # only the output: no exit code, no failure event
        assert report["hook_event_name"] == "PostToolUse"
        assert report["tool_response"] == "FAILMARK_c\n"
    else:  # the exit code only inside the model-facing text; no "error" key
        assert report["hook_event_name"] == "AfterTool"
        assert "Exit Code: 3" in report["tool_response"]["llmContent"]
        assert "error" not in report["tool_response"]


def test_d_deny_prevents_the_side_effect_and_the_reason_reaches_the_model(
    kit: ClientKit, tmp_path: Path, hook: RecordingHook
) -> None:
    hook.set_rules(
        [{"event": kit.pre_tool, "contains": "MARK_deny", "answer": kit.deny("DENYREASON_d1")}]
    )
    script = Script.of(shell("printf D > denied.txt  # MARK_deny"), shell("printf E > after.txt"))

    run = kit.run(script, tmp_path, hooks=command_hooks(hook.command, kit.events)).check()

    assert not (run.workdir / "denied.txt").exists()
    assert (run.workdir / "after.txt").read_text() == "E"
    denied, after = run.recording.result_of("MARK_deny"), run.recording.result_of("after.txt")
    assert denied.result is not None and "DENYREASON_d1" in denied.result
    assert after.result is not None and "DENYREASON" not in after.result
    # the denied call gets no after-tool report (Claude Code's PostToolBatch lists it)
    reports = [p["hook_event_name"] for p in hook.payloads() if "MARK_deny" in str(p)]
    assert kit.pre_tool in reports
    assert not {kit.post_tool, "PostToolUseFailure"} & set(reports)


def test_f_otlp_reports_each_tool_call(
    kit: ClientKit, tmp_path: Path, hook: RecordingHook, receiver: Receiver
) -> None:
    """With hooks and OTLP both on: one tool event per call, the hooks' session id, call ids
    where the client has them, the resource attributes and the exporter's headers, all
    exported before the client exits."""
    otlp = Otlp(
        receiver.url,
        resource={"harness.id": "h-e2e", "harness.project": "proj-e2e"},
        headers={"Authorization": "Bearer e2e-token"},
    )
    script = Script.of(shell("printf 'OUT%s' MARK_f1 > f.txt"), shell("echo FAILMARK_f; exit 3"))

    run = kit.run(
        script, tmp_path, hooks=command_hooks(hook.command, kit.events), otlp=otlp
    ).check()

    records = receiver.events(kit.otlp_tool_event)
    assert len(records) == len(run.calls) == 2
    assert all(body.at <= run.ended_at for body in receiver.log_bodies())
    assert {body.authorization for body in receiver.log_bodies()} == {"Bearer e2e-token"}
    assert all(r.resource["harness.id"] == "h-e2e" for r in records)
    session = hook.payloads()[0]["session_id"]
    key = "conversation.id" if kit.name == "codex" else "session.id"
    assert {r.attributes[key] for r in records} == {session}
    names = {"claude": "tool_name", "codex": "tool_name", "gemini": "function_name"}[kit.name]
    assert {r.attributes[names] for r in records} == {kit.otlp_shell_tool}
    if kit.name != "gemini":
        ids = "tool_use_id" if kit.name == "claude" else "call_id"
        assert [r.attributes[ids] for r in records] == [c.call_id for c in run.calls]
    # Claude Code reports the failure; Codex and Gemini CLI say success for exit 3
    success = [str(r.attributes["success"]).lower() for r in records]
    assert success == (["true", "false"] if kit.name == "claude" else ["true", "true"])
