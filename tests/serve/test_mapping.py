"""Every documented Claude Code hook event maps as DESIGN says; hooks and OTLP hash a call alike."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from engine.journal.rows import INSERT_COLUMNS
from engine.serve.canon import cause_digest, digest, redact_line
from engine.serve.derive import Deriver
from engine.serve.gate import GateState, answer
from engine.serve.hooks import map_hook
from engine.serve.otlp import map_request
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


def rows_of(event: str) -> list[dict[str, object]]:
    mapped = map_hook(fixture(event), harness="h01", project="atlas", deriver=Deriver(), now_ms=1)
    return [
        {c: v for c, v in zip(INSERT_COLUMNS, r, strict=True) if v is not None} for r in mapped.rows
    ]


@pytest.mark.parametrize("event", EVENTS)
def test_fixture_carries_the_documented_common_fields(event: str) -> None:
    payload = fixture(event)
    for key in ("session_id", "transcript_path", "cwd", "hook_event_name"):
        assert key in payload
    assert payload["hook_event_name"] == event


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ("SessionStart", [{"type": "run_started"}]),
        (
            "PostToolUse",
            [
                {"type": "tool_call", "tool": "Edit", "outcome": "ok", "path": "src/parser.py"},
                {"type": "file_edited", "path": "src/parser.py", "n": 1},
            ],
        ),
        ("PostToolUseFailure", [{"type": "tool_call", "tool": "Bash", "outcome": "error"}]),
        ("SessionEnd", [{"type": "run_finished", "outcome": "ok"}]),
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


def test_hook_and_otlp_hash_the_same_call_alike() -> None:
    post = fixture("PostToolUse")
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    kv = rl.resource.attributes.add()
    kv.key, kv.value.string_value = "harness.id", "h01"
    rec = rl.scope_logs.add().log_records.add()
    rec.body.string_value = "claude_code.tool_result"
    for key, value in (
        ("tool_name", "Edit"),
        ("success", "true"),
        ("session.id", RUN),
        ("tool_input", json.dumps(post["tool_input"], indent=2)),
    ):
        a = rec.attributes.add()
        a.key, a.value.string_value = key, value
    result = map_request(request, Deriver(), 1, set())
    otlp_digest = result.rows[0][INSERT_COLUMNS.index("args_digest")]
    assert otlp_digest == rows_of("PostToolUse")[0]["args_digest"]


def test_collision_when_another_harness_edits_the_same_path() -> None:
    deriver = Deriver(collision_window_ms=600_000)
    map_hook(fixture("PostToolUse"), harness="h01", project="atlas", deriver=deriver, now_ms=1000)
    mapped = map_hook(
        fixture("PostToolUse"), harness="h02", project="atlas", deriver=deriver, now_ms=2000
    )
    kinds = [(r[2], r[12]) for r in mapped.rows]
    assert ("collision", "h01") in kinds
    late = map_hook(
        fixture("PostToolUse"),
        harness="h03",
        project="atlas",
        deriver=deriver,
        now_ms=2000 + 700_000,
    )
    assert all(r[2] != "collision" for r in late.rows)


def test_free_answer_is_empty_object() -> None:
    assert answer("PreToolUse", GateState()) == ("free", {})
