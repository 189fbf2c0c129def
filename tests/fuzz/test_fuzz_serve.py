"""Fuzz surface 7: ``harness serve``'s ``POST /v1/logs`` and ``POST /hooks/claude-code`` (issue 22).

Through a real ``harness serve`` subprocess, JSON and protobuf bodies alike.
Property: a request is answered 200 (its records admitted, or rejected and
counted with a reason) or 4xx saying why, never 500, and serve's log never
shows a traceback. Issue 22 found a 500 on a tool's arguments given as JSON
text nested 972 deep: parsed (guarded), then overflowing the stack when
re-encoded for the digest; the failing depth is one wide and moves with
serve's stack, so the regression test sends every depth.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from tests.fuzz.conftest import depth_sweep, fuzz_settings
from tests.fuzz.strategies import (
    DEEPEST,
    depths,
    json_line,
    json_values,
    nested_json,
    nesting_kinds,
)
from tests.serve.conftest import CONFIG, Serve, start_serve

#: The attributes a tool's arguments arrive in (Claude Code's two, Codex's ``arguments``).
ARG_KEYS = ("tool_input", "tool_parameters", "arguments")
MEDIA = ("application/json", "application/x-protobuf")
#: Bodies up to serve's default 4 MiB: a sweep sends a few large requests, not a thousand.
BATCH_CHARS = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    config = CONFIG.replace('max_body = "64KiB"', 'max_body = "4MiB"')
    assert config != CONFIG
    srv = start_serve(tmp_path_factory.mktemp("fuzz-serve"), config=config)
    try:
        yield srv
    finally:
        srv.stop()
    assert "Traceback" not in srv.log.read_text(errors="replace")


def _str(value: str) -> dict[str, object]:
    return {"stringValue": value}


def logs_body(harness: str, records: list[dict[str, str]], media: str) -> bytes:
    """An ExportLogsServiceRequest of ``claude_code.tool_result`` records, in ``media``."""
    request = {
        "resourceLogs": [
            {
                "resource": {
                    "attributes": [
                        {"key": "harness.id", "value": _str(harness)},
                        {"key": "service.name", "value": _str("claude-code")},
                    ]
                },
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "body": _str("claude_code.tool_result"),
                                "attributes": [
                                    {"key": k, "value": _str(v)} for k, v in rec.items()
                                ],
                            }
                            for rec in records
                        ]
                    }
                ],
            }
        ]
    }
    text = json.dumps(request)
    if media == "application/json":
        return text.encode()
    message: bytes = json_format.Parse(text, ExportLogsServiceRequest()).SerializeToString()
    return message


def post_logs(server: Serve, body: bytes, media: str) -> int:
    """POST the body; the number of records serve rejected (asserting a 200)."""
    status, raw, _ = server.request("/v1/logs", body, {"Content-Type": media})
    assert status == 200, (status, raw[:300])
    if media == "application/json":
        response = json_format.Parse(raw.decode(), ExportLogsServiceResponse())
    else:
        response = ExportLogsServiceResponse.FromString(raw)
    rejected = response.partial_success.rejected_log_records
    assert not rejected or response.partial_success.error_message  # a rejection says why
    return int(rejected)


def record(run: str, key: str, args: str) -> dict[str, str]:
    return {"tool_name": "Bash", "success": "true", "session.id": run, key: args}


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("media", MEDIA)
@pytest.mark.parametrize("key", ARG_KEYS)
def test_regression_arguments_at_every_depth_are_digested(
    server: Serve, key: str, media: str
) -> None:
    """Issue 22: a 500 at the one depth serve parsed but could not re-encode (972)."""
    harness = f"deep-{ARG_KEYS.index(key)}-{MEDIA.index(media)}"
    sweep = depth_sweep(DEEPEST)
    batch: list[dict[str, str]] = []
    size = 0
    for depth in sweep:
        text = nested_json(depth, "list" if depth % 2 else "object")
        batch.append(record(f"d{depth}", key, text))
        size += len(text)
        if size > BATCH_CHARS or depth == sweep[-1]:
            assert post_logs(server, logs_body(harness, batch, media), media) == 0
            batch, size = [], 0
    rows = server.wait_rows(len(sweep), f"harness = '{harness}' AND type = 'tool_call'")
    assert len(rows) == len(sweep)
    for row in rows:
        depth = int(row["run"][1:])
        text = nested_json(depth, "list" if depth % 2 else "object")
        # Parsed: the canonical text is the text itself. Past the parser: hashed as a string.
        assert row["args_digest"] in (_sha(text), _sha(json.dumps(text))), depth
        if depth < 900:
            assert row["args_digest"] == _sha(text), depth


@pytest.mark.parametrize("field", ["tool_input", "error"])
def test_hook_fields_at_every_depth_near_the_limit(server: Serve, field: str) -> None:
    event = "PostToolUseFailure" if field == "error" else "PostToolUse"
    for depth in depth_sweep(DEEPEST, band=80, stride=25):
        head = json.dumps({"hook_event_name": event, "session_id": "s1", "tool_name": "Bash"})
        body = f'{head[:-1]}, "tool_input": {{}}, "{field}": {nested_json(depth)}}}'
        status, raw, _ = server.request(
            "/hooks/claude-code?harness=hk1&project=p1",
            body.encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 200 or (status == 400 and raw), (depth, status, raw[:200])


@fuzz_settings()  # the surface's 10,000 under the slow profile: each depth ~10 times
@given(st.sampled_from(ARG_KEYS), st.sampled_from(MEDIA), depths, nesting_kinds)
def test_arguments_at_any_depth(server: Serve, key: str, media: str, depth: int, kind: str) -> None:
    body = logs_body("fz1", [record("r1", key, nested_json(depth, kind))], media)
    assert post_logs(server, body, media) == 0


@fuzz_settings(through_store=True)
@given(st.sampled_from(ARG_KEYS), st.sampled_from(MEDIA), json_values)
def test_arguments_of_any_value(server: Serve, key: str, media: str, value: object) -> None:
    text = json_line(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(
            value, ensure_ascii=True
        )  # protobuf strings are UTF-8: no lone surrogates
    body = logs_body("fz2", [record("r2", key, text)], media)
    assert post_logs(server, body, media) == 0


@fuzz_settings()  # 10,000 hook requests under the slow profile
@given(
    st.sampled_from(["PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"]),
    st.sampled_from(["tool_input", "error", "tool_response", "cwd"]),
    st.one_of(
        st.tuples(depths, nesting_kinds).map(lambda dk: nested_json(*dk)),
        json_values.map(json_line),
    ),
)
def test_hook_payload_fields_of_any_shape(server: Serve, event: str, field: str, raw: str) -> None:
    head = json.dumps({"hook_event_name": event, "session_id": "s2", "tool_name": "Bash"})
    body = f'{head[:-1]}, "{field}": {raw}}}'
    status, answer, _ = server.request(
        "/hooks/claude-code?harness=hk2&project=p1",
        body.encode("utf-8", "surrogatepass"),
        {"Content-Type": "application/json"},
    )
    assert status == 200 or (status == 400 and answer), (status, answer[:200])
    if status == 200:
        assert isinstance(json.loads(answer), dict)
