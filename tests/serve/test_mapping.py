"""Every documented Claude Code hook event maps as DESIGN says; hooks and OTLP hash a call alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from engine.serve.canon import cause_digest, digest, redact_line
from tests.serve._rig import Rig
from tests.serve.conftest import fixture

EVENTS = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
]
RUN = "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"
PARSER = "/home/dev/src/atlas/src/parser.py"


def rows_of(event: str, rig: Rig | None = None) -> list[dict[str, Any]]:
    """The rows ``event`` adds to a run that has already started."""
    rig = rig or Rig()
    rig.hook(fixture("SessionStart"))
    start = len(rig.journal.rows)
    reply = rig.hook(fixture(event))
    assert reply.status == 200, reply
    return rig.new_rows(start)


@pytest.mark.parametrize("event", EVENTS)
def test_fixture_carries_the_documented_common_fields(event: str) -> None:
    payload = fixture(event)
    for key in ("session_id", "transcript_path", "cwd", "hook_event_name"):
        assert key in payload
    assert payload["hook_event_name"] == event


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            "PostToolUse",
            [
                {"type": "tool_call", "tool": "Edit", "outcome": "ok", "path": PARSER},
                {"type": "file_edited", "path": PARSER, "n": 1},
            ],
        ),
        ("PostToolUseFailure", [{"type": "tool_call", "tool": "Bash", "outcome": "error"}]),
        ("SessionEnd", [{"type": "run_finished", "outcome": "ok"}]),
        ("SessionStart", []),  # the run was started: a second SessionStart adds nothing
        ("UserPromptSubmit", []),
        ("PreToolUse", []),
        ("Notification", []),
        ("Stop", []),
        ("SubagentStop", []),
        ("PreCompact", []),
    ],
)
def test_mapping(event: str, expected: list[dict[str, object]]) -> None:
    rows = rows_of(event)
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row["harness"] == "h01" and row["run"] == RUN
        for key, value in want.items():
            assert row[key] == value, key


@pytest.mark.parametrize("event", [e for e in EVENTS if e != "SessionEnd"])
def test_the_first_event_of_an_unseen_session_starts_its_run(event: str) -> None:
    rig = Rig()
    reply = rig.hook(fixture(event))
    assert reply.status == 200
    rows = rig.journal.dicts()
    assert rows[0]["type"] == "run_started" and rows[0]["run"] == RUN
    assert sum(r["type"] == "run_started" for r in rows) == 1
    rig.hook(fixture(event))
    assert sum(r["type"] == "run_started" for r in rig.journal.dicts()) == 1


def test_tool_call_digests() -> None:
    post = fixture("PostToolUse")
    (call, _edit) = rows_of("PostToolUse")
    assert call["args_digest"] == digest(post["tool_input"])
    (fail,) = rows_of("PostToolUseFailure")
    error = fixture("PostToolUseFailure")["error"]
    assert fail["cause_digest"] == cause_digest(error)
    assert (
        redact_line(str(error))
        == "FAILED tests/test_parser.py::test_empty - AssertionError: # != #"
    )


@pytest.mark.parametrize(
    ("given", "cwd", "stored"),
    [
        ("/home/dev/src/atlas/src/parser.py", "/home/dev/src/atlas", PARSER),
        ("src/parser.py", "/home/dev/src/atlas", PARSER),
        ("./src/../src/parser.py", "/home/dev/src/atlas", PARSER),
        ("../other/x.py", "/home/dev/src/atlas", "/home/dev/src/other/x.py"),
        ("/tmp/a/../b.txt", "/home/dev", "/tmp/b.txt"),
    ],
)
def test_paths_are_stored_absolute_and_normalized(given: str, cwd: str, stored: str) -> None:
    post = fixture("PostToolUse")
    post["cwd"] = cwd
    post["tool_input"] = dict(post["tool_input"], file_path=given)  # type: ignore[call-overload]
    rig = Rig()
    rig.hook(post)
    paths = {r.get("path") for r in rig.journal.dicts() if r["type"] != "run_started"}
    assert paths == {stored}


def claude_record(request: ExportLogsServiceRequest, **attrs: str) -> None:
    rl = request.resource_logs.add()
    kv = rl.resource.attributes.add()
    kv.key, kv.value.string_value = "harness.id", "h01"
    kv = rl.resource.attributes.add()
    kv.key, kv.value.string_value = "harness.project", "atlas"
    rec = rl.scope_logs.add().log_records.add()
    rec.body.string_value = "claude_code.tool_result"
    for key, value in attrs.items():
        a = rec.attributes.add()
        a.key, a.value.string_value = key.replace("__", "."), value


def test_hook_and_otlp_hash_the_same_call_alike_and_store_it_once() -> None:
    post = fixture("PostToolUse")
    hook_rig, otlp_rig, both = Rig(), Rig(), Rig()
    request = ExportLogsServiceRequest()
    claude_record(
        request,
        tool_name="Edit",
        success="true",
        session__id=RUN,
        tool_input=json.dumps(post["tool_input"], indent=2),
    )
    hook_rig.hook(post)
    otlp_rig.receiver.receive(request)
    hooked = [r for r in hook_rig.journal.dicts() if r["type"] == "tool_call"]
    exported = [r for r in otlp_rig.journal.dicts() if r["type"] == "tool_call"]
    assert hooked[0]["args_digest"] == exported[0]["args_digest"]
    assert hooked[0]["path"] == exported[0]["path"] == PARSER
    both.hook(post)
    reply = both.receiver.receive(request)
    assert reply.duplicates == 1 and reply.records == {("claude_code.tool_result", "duplicate"): 1}
    assert [r["type"] for r in both.journal.dicts()] == ["run_started", "tool_call", "file_edited"]


def test_collision_when_another_harness_edits_the_same_path() -> None:
    rig = Rig(window_ms=600_000)
    rig.hook(fixture("PostToolUse"), harness="h01")
    rig.now = 2000
    start = len(rig.journal.rows)
    rig.hook(fixture("PostToolUse"), harness="h02")
    kinds = [(r["type"], r.get("other_harness")) for r in rig.new_rows(start)]
    assert ("collision", "h01") in kinds
    rig.now = 2000 + 700_000
    start = len(rig.journal.rows)
    rig.hook(fixture("PostToolUse"), harness="h03")
    assert all(r["type"] != "collision" for r in rig.new_rows(start))


def test_free_answer_is_empty_object() -> None:
    reply = Rig().hook(fixture("PreToolUse"))
    assert (reply.status, reply.answer, reply.decision) == (200, {}, "free")
