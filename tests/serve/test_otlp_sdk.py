"""OTLP logs from the official OpenTelemetry Python SDK into a real ``harness serve``.

Protobuf (and gzip) go through the SDK's own ``OTLPLogExporter``. That
exporter speaks only protobuf, so the JSON case serialises the SDK's own
``ExportLogsServiceRequest`` (built by the exporter's encoder from the same
SDK records) with ``google.protobuf.json_format`` and posts it as
``application/json``, which is the OTLP/JSON encoding the specification
defines.
"""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from prometheus_client.parser import text_string_to_metric_families

from engine.serve.canon import digest
from tests.serve.conftest import Serve

CLAUDE = {"service.name": "claude-code", "harness.id": "o01", "harness.project": "atlas"}
CODEX = {"service.name": "codex-cli", "harness.id": "o02", "harness.project": "atlas"}


def provider(resource: dict[str, str], processor: object) -> LoggerProvider:
    p = LoggerProvider(resource=Resource.create(resource))
    p.add_log_record_processor(processor)  # type: ignore[arg-type]
    return p


def emit_claude(p: LoggerProvider, session: str, n: int = 1, *, success: str = "true") -> None:
    logger = p.get_logger("com.anthropic.claude_code.events")
    for i in range(n):
        logger.emit(
            body="claude_code.tool_result",
            attributes={
                "event.name": "tool_result",
                "session.id": session,
                "tool_name": "Edit",
                "success": success,
                "duration_ms": 12 + i,
                "error": "Traceback\nValueError: bad value 42" if success == "false" else "",
                "tool_input": json.dumps(
                    {"file_path": "/src/atlas/app.py", "old_string": "a", "new_string": "b"}
                ),
            },
        )


def test_protobuf_export_maps_claude_tool_results_field_by_field(serve: Serve) -> None:
    exporter = OTLPLogExporter(endpoint=serve.base + "/v1/logs")
    p = provider(CLAUDE, BatchLogRecordProcessor(exporter))
    emit_claude(p, "sess-pb", 3)
    emit_claude(p, "sess-pb", 1, success="false")
    assert p.force_flush(10_000)
    p.shutdown()
    rows = serve.wait_rows(4, "harness = 'o01' AND type = 'tool_call'")
    assert len(rows) == 4
    want_args = digest({"file_path": "/src/atlas/app.py", "old_string": "a", "new_string": "b"})
    for row in rows:
        assert (row["kind"], row["source"], row["project"], row["run"], row["tool"]) == (
            "run_event",
            "observer",
            "atlas",
            "sess-pb",
            "Edit",
        )
        assert row["args_digest"] == want_args
        assert row["path"] == "/src/atlas/app.py"
    assert [r["outcome"] for r in rows] == ["ok", "ok", "ok", "error"]
    assert rows[3]["cause_digest"] is not None and rows[3]["cause_digest"].startswith("sha256:")
    assert all(r["cause_digest"] is None for r in rows[:3])
    edits = serve.rows("harness = 'o01' AND type = 'file_edited'")
    assert len(edits) == 3 and {e["source"] for e in edits} == {"graph"}


def test_gzip_protobuf_export_codex(serve: Serve) -> None:
    exporter = OTLPLogExporter(endpoint=serve.base + "/v1/logs", compression=Compression.Gzip)
    p = provider(CODEX, SimpleLogRecordProcessor(exporter))
    p.get_logger("codex_otel").emit(
        body="",
        attributes={
            "event.name": "codex.tool_result",
            "conversation.id": "conv-7",
            "tool_name": "apply_patch",
            "call_id": "call_1",
            "arguments": json.dumps(
                {"input": "*** Begin Patch\n*** Update File: src/x.py\n@@\n-a\n+b\n*** End Patch"}
            ),
            "duration_ms": "5",
            "success": "true",
            "output": "Success. Updated the following files",
        },
    )
    p.shutdown()
    rows = serve.wait_rows(1, "harness = 'o02' AND type = 'tool_call'")
    assert len(rows) == 1
    row = rows[0]
    assert (row["run"], row["tool"], row["outcome"], row["path"]) == (
        "conv-7",
        "Edit",  # Codex's apply_patch, by the journal's one tool vocabulary
        "ok",
        "src/x.py",
    )
    assert serve.rows("harness = 'o02' AND type = 'file_edited' AND path = 'src/x.py'")


def sdk_request(resource: dict[str, str], emit: object) -> object:
    memory = InMemoryLogRecordExporter()
    p = provider(resource, SimpleLogRecordProcessor(memory))
    emit(p)  # type: ignore[operator]
    p.shutdown()
    return encode_logs(memory.get_finished_logs())


def test_json_export_of_the_sdk_request(serve: Serve) -> None:
    request = sdk_request({**CLAUDE, "harness.id": "o03"}, lambda p: emit_claude(p, "sess-js", 2))
    body = json_format.MessageToJson(request).encode()  # type: ignore[arg-type]
    status, raw, headers = serve.request("/v1/logs", body, {"Content-Type": "application/json"})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(raw) == {}  # nothing rejected: no partial_success
    rows = serve.wait_rows(2, "harness = 'o03' AND type = 'tool_call'")
    assert [(r["run"], r["tool"], r["outcome"]) for r in rows] == [("sess-js", "Edit", "ok")] * 2


def test_partial_success_names_the_first_reason(serve: Serve) -> None:
    def emit(p: LoggerProvider) -> None:
        p.get_logger("x").emit(
            body="claude_code.tool_result", attributes={"tool_name": "Bash", "success": "true"}
        )

    request = sdk_request({"service.name": "claude-code"}, emit)
    status, raw, _ = serve.request(
        "/v1/logs",
        request.SerializeToString(),  # type: ignore[attr-defined]
        {"Content-Type": "application/x-protobuf"},
    )
    assert status == 200
    response = ExportLogsServiceResponse.FromString(raw)
    assert response.partial_success.rejected_log_records == 1
    assert "harness.id" in response.partial_success.error_message


def test_other_events_are_ignored_and_counted(serve: Serve) -> None:
    def emit(p: LoggerProvider) -> None:
        p.get_logger("x").emit(
            body="claude_code.api_request", attributes={"model": "m", "cost_usd": 0.1}
        )

    request = sdk_request({**CLAUDE, "harness.id": "o04"}, emit)
    status, _, _ = serve.request(
        "/v1/logs",
        request.SerializeToString(),  # type: ignore[attr-defined]
        {"Content-Type": "application/x-protobuf"},
    )
    assert status == 200
    assert serve.rows("harness = 'o04'") == []
    families = {
        f.name: f for f in text_string_to_metric_families(serve.request("/metrics")[1].decode())
    }
    samples = {
        (s.labels.get("event"), s.labels.get("verdict")): s.value
        for s in families["harness_serve_records"].samples
    }
    assert samples[("claude_code.api_request", "ignored")] >= 1
    assert samples[("claude_code.tool_result", "admitted")] >= 1


@pytest.mark.parametrize("path", ["/metrics"])
def test_metrics_parse_with_prometheus_parser(serve: Serve, path: str) -> None:
    status, raw, headers = serve.request(path)
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(raw.decode())}
    for name in (
        "harness_journal_rows",
        "harness_journal_dropped",
        "harness_evaluator_lease_held",
        "harness_serve_requests",
        "harness_serve_gate_answers",
        "harness_serve_handler_seconds",
    ):
        assert name in families, name
    assert families["harness_serve_handler_seconds"].type == "histogram"
    lease = [s.value for s in families["harness_evaluator_lease_held"].samples]
    assert lease == [1.0]


def test_healthz(serve: Serve) -> None:
    status, raw, _ = serve.request("/healthz")
    assert status == 200
    assert json.loads(raw)["writer"] == "running"
