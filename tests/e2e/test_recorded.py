"""The recorded real payloads under ``recorded/`` load, and say what the README says they do.

These need no npm: they read the fixtures ``record_payloads.py`` wrote from real runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._receiver import OtlpBody, decode_logs

RECORDED = Path(__file__).with_name("recorded")
CLIENT_DIRS = {
    "claude": RECORDED / "claude-code-2.1.332",
    "codex": RECORDED / "codex-0.171.0",
    "gemini": RECORDED / "gemini-cli-0.61.0",
}
EVENTS = {
    "claude": {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "Stop",
        "SessionEnd",
    },
    "codex": {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    },
    "gemini": {
        "SessionStart",
        "BeforeAgent",
        "BeforeTool",
        "AfterTool",
        "AfterAgent",
        "SessionEnd",
    },
}
TOOL_EVENTS = {
    "claude": "claude_code.tool_result",
    "codex": "codex.tool_result",
    "gemini": "gemini_cli.tool_call",
}


def hooks_of(client: str) -> dict[str, dict[str, Any]]:
    folder = CLIENT_DIRS[client] / "hooks"
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def bodies_of(client: str) -> list[OtlpBody]:
    bodies = []
    for path in sorted(CLIENT_DIRS[client].glob("otlp-logs-*")):
        is_json = path.suffix == ".json"
        content_type = "application/json" if is_json else "application/x-protobuf"
        bodies.append(OtlpBody(time.monotonic(), "/v1/logs", content_type, "", path.read_bytes()))
    return bodies


@pytest.mark.parametrize("client", sorted(CLIENT_DIRS))
def test_every_event_was_recorded_with_its_common_fields(client: str) -> None:
    payloads = hooks_of(client)
    assert {p["hook_event_name"] for p in payloads.values()} == EVENTS[client]
    for name, payload in payloads.items():
        assert payload["session_id"] and payload["cwd"] and payload["transcript_path"], name
        assert name.removeprefix("http-").startswith(payload["hook_event_name"])


@pytest.mark.parametrize("client", sorted(CLIENT_DIRS))
def test_the_otlp_bodies_hold_one_tool_event_per_call(client: str) -> None:
    records = [r for body in bodies_of(client) for r in decode_logs(body)]
    tools = [r for r in records if r.event == TOOL_EVENTS[client]]
    assert len(tools) == 3  # a shell call, a write, a shell call exiting 3
    assert {r.resource["harness.id"] for r in tools} == {"h-rec"}


def test_codex_puts_a_source_location_in_event_name_and_says_success_for_exit_3() -> None:
    records = [r for body in bodies_of("codex") for r in decode_logs(body)]
    [failed] = [r for r in records if "FAILMARK" in str(r.attributes.get("arguments"))]
    assert failed.event_name_field.startswith("event otel/src/")
    assert failed.attributes["event.name"] == "codex.tool_result"
    assert failed.attributes["success"] == "true"
    assert "Process exited with code 3" in failed.attributes["output"]


def test_codex_hooks_report_exec_command_as_bash_and_no_exit_code() -> None:
    payloads = hooks_of("codex")
    assert payloads["PreToolUse-Bash"]["tool_input"].keys() == {"command"}
    assert payloads["PostToolUse-Bash-exit3"]["tool_response"] == "FAILMARK_c3d4\n"
    assert payloads["PreToolUse-apply_patch"]["tool_input"]["command"].startswith("*** Begin Patch")


def test_gemini_has_no_call_ids_and_puts_the_prompt_in_its_resource() -> None:
    assert all("tool_use_id" not in p for p in hooks_of("gemini").values())
    [body] = bodies_of("gemini")
    records = decode_logs(body)
    assert "PROMPTMARK_7f3a" in str(records[0].resource["process.command_args"])
    calls = [r for r in records if r.event == "gemini_cli.tool_call"]
    assert all("function_args" not in r.attributes for r in calls)  # logPrompts is off


def test_claude_code_otlp_carries_the_hooks_call_ids() -> None:
    records = [r for body in bodies_of("claude") for r in decode_logs(body)]
    tools = [r for r in records if r.event == "claude_code.tool_result"]
    pre_ids = {p["tool_use_id"] for n, p in hooks_of("claude").items() if n.startswith("PreTool")}
    assert {r.attributes["tool_use_id"] for r in tools} <= pre_ids
    assert [r.attributes["success"] for r in tools] == ["true", "true", "false"]
