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


def test_rows_of_a_request_keep_order_and_a_full_queue_drops_the_remainder(
    tmp_path: Path,
) -> None:
    store = tmp_path / "j.db"
    runtime = ServeRuntime(
        store, HarnessConfig(), [], ServeMetrics(), queue_capacity=150, evaluate=False
    )  # not started: nothing drains, so the second request finds room for 50 rows

    async def go() -> list[tuple[int, int]]:
        app = build_app(
            runtime, token=None, max_body=1 << 20, loop_guard=8, collision_window_ms=600_000
        )
        out = []
        async with TestClient(TestServer(app)) as client:
            for first in (0, 100):
                resp = await client.post(
                    "/v1/logs",
                    data=batch(first, 100),
                    headers={"Content-Type": "application/x-protobuf"},
                )
                answer = ExportLogsServiceResponse.FromString(await resp.read())
                out.append((resp.status, answer.partial_success.rejected_log_records))
        return out

    # A dropped row is the store's loss, not the client's mistake: no rejection.
    assert asyncio.run(go()) == [(200, 0), (200, 0)]
    assert runtime.metrics.totals["rows_queued"] == 150
    assert runtime.metrics.totals["rows_dropped"] == 50
    assert runtime.metrics.records[("claude_code.tool_result", "admitted")] == 200
    runtime.writer.start()
    runtime.close()
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT harness, run, tool, outcome, args_digest FROM rule_journal "
            "WHERE kind != 'tick' ORDER BY seq"
        ).fetchall()
        counters = dict(conn.execute("SELECT name, value FROM journal_counters"))
    finally:
        conn.close()
    expected = [("q01", "s1", "Bash", "ok", digest({"command": f"make t{i}"})) for i in range(150)]
    assert rows == expected  # the first 150 records, whole and in order; t150..t199 dropped
    assert counters["dropped"] == 50
    assert counters["serve_rows_dropped"] == 50
