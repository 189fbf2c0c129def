"""Bodies recorded from the real clients map as DESIGN says (``../shared/real-clients``).

Codex CLI 0.171.0 over OTLP (protobuf), Gemini CLI 0.61.0 over its command
hooks and OTLP/JSON. These are the shapes that hid bugs before: Codex's
source location in ``event_name``, its ``success = true`` for a command that
exited 3, Gemini's event name only in ``event.name``, its blocked calls
reported as failed tool calls, and its answers in another format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from engine.rules.authority.holds import Hold
from engine.rules.authority.stops import RunStop
from engine.serve.canon import digest
from engine.serve.ports import GateState
from tests.serve._rig import Rig

SHARED = Path(__file__).resolve().parents[3] / "shared" / "real-clients"
GEMINI = SHARED / "gemini-cli-0.61.0"
MARKERS = ("MARK_", "CMDMARK", "PROMPTMARK", "echo hi", "hello\\n", "say hi")

pytestmark = pytest.mark.skipif(
    not SHARED.is_dir(), reason=f"recorded real-client bodies not found at {SHARED}"
)


def codex(name: str) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    request.ParseFromString((SHARED / name).read_bytes())
    return request


def gemini_otlp(run: str) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    json_format.Parse((GEMINI / "otlp" / f"{run}-logs-trimmed.json").read_text(), request)
    return request


def gemini_hooks(run: str) -> list[dict[str, object]]:
    """A recorded run's hook payloads, in the order the CLI sent them."""
    files = sorted(
        (GEMINI / "hooks").glob(f"{run}-*.in.json"),
        key=lambda p: next(
            int(line.split()[0])
            for line in (GEMINI / "hooks" / f"{run}-index.log").read_text().splitlines()
            if line.split()[0].endswith(p.name.split("-")[1])
        ),
    )
    return [json.loads(p.read_text()) for p in files]


def no_agent_text(rig: Rig) -> None:
    text = json.dumps(rig.journal.dicts())
    for marker in MARKERS:
        assert marker not in text


def test_codex_tool_result_is_a_failed_shell_call_with_its_exit_code() -> None:
    rig = Rig()
    reply = rig.receiver.receive(codex("codex-0.171.0_tool_result_1record.pb"))
    assert reply.records == {("codex.tool_result", "admitted"): 1}
    started, call = rig.journal.dicts()
    assert started["type"] == "run_started"
    assert call["type"] == "tool_call" and call["harness"] == "h02" and call["project"] == "atlas"
    assert call["tool"] == "Bash"  # Codex's exec_command, in the journal's one vocabulary
    assert call["outcome"] == "error" and call["n"] == 3  # success = "true", exited 3
    assert call["run"] == "01a231ba-5a1e-7610-87ec-d9a1e5067c0b"
    assert call["cause_digest"].startswith("sha256:")
    no_agent_text(rig)


def test_codex_batch_one_row_per_tool_call_others_ignored_by_known_name() -> None:
    rig = Rig()
    reply = rig.receiver.receive(codex("codex-0.171.0_batch1_20records.pb"))
    assert reply.records[("codex.tool_result", "admitted")] == 1
    assert reply.records[("codex.sse_event", "ignored")] == 10
    assert sum(reply.records.values()) == 20 and reply.rejected == 0
    calls = [r for r in rig.journal.dicts() if r["type"] == "tool_call"]
    assert [(c["outcome"], c.get("n")) for c in calls] == [("ok", 0)]
    no_agent_text(rig)


def test_codex_hook_and_otlp_report_of_one_call_is_one_row() -> None:
    rig = Rig()
    request = codex("codex-0.171.0_tool_result_1record.pb")
    hook = {
        "session_id": "01a231ba-5a1e-7610-87ec-d9a1e5067c0b",
        "transcript_path": None,
        "cwd": "/home/dev/proj",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "sh -c 'exit 3'"},
        "tool_use_id": "call_14",
        "tool_response": "…",
    }
    assert rig.hook(hook, agent="codex", harness="h02").status == 200
    reply = rig.receiver.receive(request)
    assert reply.duplicates == 1
    assert [r["type"] for r in rig.journal.dicts()].count("tool_call") == 1


def test_gemini_otlp_names_come_from_event_name_and_blocked_calls_are_no_calls() -> None:
    rig = Rig()
    normal = rig.receiver.receive(gemini_otlp("run2"))
    assert normal.records[("gemini_cli.tool_call", "admitted")] == 2
    assert normal.records[("gemini_cli.config", "ignored")] == 1
    shell, write = (r for r in rig.journal.dicts() if r["type"] == "tool_call")
    assert (shell["tool"], shell["outcome"]) == ("Bash", "ok")
    assert (write["tool"], write["outcome"], write["path"]) == (
        "Write",
        "ok",
        "/home/dev/gem/work/x.txt",
    )
    assert shell["args_digest"] == digest({"command": "echo hi"})  # a shell call: its command
    held = Rig()
    assert (
        held.receiver.receive(gemini_otlp("run4")).records[("gemini_cli.tool_call", "blocked")] == 2
    )
    stopped = Rig()
    assert (
        stopped.receiver.receive(gemini_otlp("run5")).records[("gemini_cli.tool_call", "blocked")]
        == 1
    )
    assert not [
        r for r in held.journal.dicts() + stopped.journal.dicts() if r["type"] == "tool_call"
    ]
    no_agent_text(rig)


def test_gemini_hooks_journal_the_run_and_its_calls_with_the_otlp_digest() -> None:
    rig = Rig()
    for payload in gemini_hooks("run2"):
        reply = rig.hook(payload, agent="gemini", harness="g01", project="gem")
        assert reply.status == 200 and reply.answer == {}
    types = [r["type"] for r in rig.journal.dicts()]
    assert types == ["run_started", "tool_call", "tool_call", "file_edited", "run_finished"]
    calls = [r for r in rig.journal.dicts() if r["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["Bash", "Write"]
    # hooks + OTLP for the same run: the two OTLP records are the same calls (no call ids)
    reply = rig.receiver.receive(gemini_otlp("run2"))
    assert reply.duplicates == 2 and reply.rows == 0
    no_agent_text(rig)


def test_gemini_answers_in_its_own_format() -> None:
    before_tool = next(p for p in gemini_hooks("run2") if p["hook_event_name"] == "BeforeTool")
    before_agent = next(p for p in gemini_hooks("run2") if p["hook_event_name"] == "BeforeAgent")
    rig = Rig()
    hold = Hold(1, "g01", None, "r", "h", 1, 1, 1, "rule_hold: rule `r` fired at seq 1: test")
    rig.gate.answer = GateState((hold,))
    denied = rig.hook(before_tool, agent="gemini", harness="g01").answer
    assert denied["decision"] == "deny" and denied["reason"].startswith("held by rule r (hold 1)")
    assert "hookSpecificOutput" not in denied  # Gemini ignores Claude's format: the tool would run
    assert rig.hook(before_agent, agent="gemini", harness="g01").answer["decision"] == "deny"
    rig.gate.answer = GateState((), RunStop("g01", "s", "r", 4, 9, "ran x"))
    stopped = rig.hook(before_tool, agent="gemini", harness="g01").answer
    assert stopped["decision"] == "deny" and stopped["continue"] is False
    assert stopped["stopReason"] == stopped["reason"]


def test_gemini_after_tool_with_an_error_is_a_failed_call() -> None:
    after = next(p for p in gemini_hooks("run2") if p["hook_event_name"] == "AfterTool")
    failed = dict(after, tool_response={"llmContent": "x", "error": "Command exited 2"})
    rig = Rig()
    rig.hook(failed, agent="gemini", harness="g01")
    (call,) = [r for r in rig.journal.dicts() if r["type"] == "tool_call"]
    assert call["outcome"] == "error" and call["cause_digest"].startswith("sha256:")


RECORDED = Path(__file__).resolve().parents[1] / "e2e" / "recorded"


def recorded_hook(client: str, name: str) -> dict[str, object]:
    return json.loads((RECORDED / client / "hooks" / f"{name}.json").read_text())


def recorded_otlp(client: str) -> list[ExportLogsServiceRequest]:
    out = []
    for path in sorted((RECORDED / client).glob("otlp-logs-*")):
        request = ExportLogsServiceRequest()
        if path.suffix == ".json":
            json_format.Parse(path.read_text(), request)
        else:
            request.ParseFromString(path.read_bytes())
        out.append(request)
    return out


def test_one_shell_command_has_one_digest_from_every_agent_and_source() -> None:
    # The recorded runs gave all three agents the same first command.
    digests = set()
    for client, agent in (
        ("claude-code-2.1.332", "claude-code"),
        ("codex-0.171.0", "codex"),
        ("gemini-cli-0.61.0", "gemini"),
    ):
        name = "AfterTool-run_shell_command" if agent == "gemini" else "PostToolUse-Bash"
        hooked = Rig()
        hooked.hook(recorded_hook(client, name), agent=agent, harness="d1")
        exported = Rig()
        for request in recorded_otlp(client):
            exported.receiver.receive(request)
        first = next(r for r in hooked.journal.dicts() if r["type"] == "tool_call")
        calls = [r for r in exported.journal.dicts() if r["type"] == "tool_call"]
        digests.add(first["args_digest"])
        if agent != "gemini":  # Gemini exports arguments only with logPrompts: true
            digests.add(calls[0]["args_digest"])
        assert first["tool"] == calls[0]["tool"] == "Bash"
    assert len(digests) == 1, digests


def test_recorded_runs_over_both_sources_are_one_row_per_call_with_the_truest_outcome() -> None:
    for client, agent, events in (
        (
            "claude-code-2.1.332",
            "claude-code",
            ("PostToolUse-Bash", "PostToolUse-Write", "PostToolUseFailure-Bash-exit3"),
        ),
        (
            "gemini-cli-0.61.0",
            "gemini",
            (
                "AfterTool-run_shell_command",
                "AfterTool-write_file",
                "AfterTool-run_shell_command-exit3",
            ),
        ),
    ):
        rig = Rig()
        for name in events:
            assert rig.hook(recorded_hook(client, name), agent=agent, harness="b1").status == 200
        for request in recorded_otlp(client):
            for rl in request.resource_logs:  # the recording's harness is h-rec: this rig's is b1
                for kv in rl.resource.attributes:
                    if kv.key == "harness.id":
                        kv.value.string_value = "b1"
            rig.receiver.receive(request)
        calls = [r for r in rig.journal.dicts() if r["type"] == "tool_call"]
        assert [(c["tool"], c["outcome"]) for c in calls] == [
            ("Bash", "ok"),
            ("Write", "ok"),
            ("Bash", "error"),
        ], client
        no_agent_text(rig)
