"""``POST /v1/logs`` offers a request's rows as one batch: in order; a full queue drops the rest."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from engine.config import HarnessConfig
from engine.serve.app import build_app
from engine.serve.canon import digest
from engine.serve.metrics import ServeMetrics
from engine.serve.runtime import ServeRuntime


def batch(first: int, size: int) -> bytes:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    for key, value in (("service.name", "claude-code"), ("harness.id", "q01")):
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    scope = rl.scope_logs.add()
    for i in range(first, first + size):
        rec = scope.log_records.add()
        rec.body.string_value = "claude_code.tool_result"
        for key, value in (
            ("tool_name", "Bash"),
            ("success", "true"),
            ("session.id", "s1"),
            ("tool_input", json.dumps({"command": f"make t{i}"})),
        ):
            a = rec.attributes.add()
            a.key, a.value.string_value = key, value
    return request.SerializeToString()


def stored(store: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT type, harness, run, tool, outcome, args_digest FROM rule_journal "
            "WHERE kind != 'tick' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()


async def post_batches(runtime: ServeRuntime, *firsts: int, size: int = 100) -> list[tuple]:
    """POST one batch per ``first``; (status, rejected, Retry-After, rows stored at the answer)."""
    app = build_app(runtime, token=None, max_body=1 << 20)
    out: list[tuple] = []
    async with TestClient(TestServer(app)) as client:
        for first in firsts:
            resp = await client.post(
                "/v1/logs",
                data=batch(first, size),
                headers={"Content-Type": "application/x-protobuf"},
            )
            body = await resp.read()
            rejected = (
                ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records
                if resp.status == 200
                else None
            )
            out.append(
                (resp.status, rejected, resp.headers.get("Retry-After"), len(stored(runtime.store)))
            )
    return out


def test_an_answer_means_the_rows_are_committed_in_order(tmp_path: Path) -> None:
    runtime = ServeRuntime(tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), evaluate=False)
    runtime.start()
    try:
        answers = asyncio.run(post_batches(runtime, 0, 100))
    finally:
        runtime.close()
    # Each 200 is given only once its rows are in the store: run_started + 100, then 100 more.
    assert answers == [(200, 0, None, 101), (200, 0, None, 201)]
    rows = stored(runtime.store)
    assert rows[0][:3] == ("run_started", "q01", "s1")
    expected = [
        ("tool_call", "q01", "s1", "Bash", "ok", digest({"command": f"make t{i}"}))
        for i in range(200)
    ]
    assert rows[1:] == expected
    assert runtime.metrics.records[("claude_code.tool_result", "admitted")] == 200
    assert runtime.metrics.totals["rows_stored"] == 201


def test_a_request_the_queue_cannot_take_is_503_and_leaves_nothing(tmp_path: Path) -> None:
    runtime = ServeRuntime(
        tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), queue_capacity=150, evaluate=False
    )
    runtime.start()
    try:
        answers = asyncio.run(post_batches(runtime, 0, 100, size=100))
        too_big = asyncio.run(post_batches(runtime, 200, size=151))
    finally:
        runtime.close()
    assert answers == [(200, 0, None, 101), (200, 0, None, 201)]
    status, rejected, retry, count = too_big[0]
    assert (status, rejected, retry, count) == (503, None, "2", 201)
    assert runtime.metrics.totals["store_unavailable"] == 1


def test_rows_not_committed_in_time_are_withdrawn_and_answered_503(tmp_path: Path) -> None:
    runtime = ServeRuntime(tmp_path / "j.db", HarnessConfig(), [], ServeMetrics(), evaluate=False)
    runtime.journal.timeout_s = 0.2  # the writer is not started: nothing will commit
    answers = asyncio.run(post_batches(runtime, 0))
    assert answers[0][:3] == (503, None, "2")
    runtime.start()
    runtime.close()
    assert stored(runtime.store) == []  # withdrawn whole: an exporter's retry duplicates nothing
    assert runtime.writer.stats().withdrawn == 101
