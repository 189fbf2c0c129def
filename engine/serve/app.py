"""The aiohttp application of ``harness serve``: OTLP logs, Claude Code hooks, metrics, health.

Endpoints (DESIGN.md "Real agents"):

- ``POST /v1/logs``: OTLP/HTTP logs (protobuf or JSON, optional gzip) ->
  ``ExportLogsServiceResponse`` with ``partial_success`` for rejected
  records; 400 undecodable, 413 over ``[serve] max_body`` or too many
  records, 415 another content type.
- ``POST /hooks/claude-code?harness=ID&project=NAME``: a hook payload -> the
  event's JSON answer from holds and stops; 503 with the reason when the
  store cannot be read.
- ``GET /metrics``: the ``harness metrics`` families plus serve's own.
- ``GET /healthz``: 200 when the writer and evaluator run, else 503 and why.

Security: with a token every request needs ``Authorization: Bearer <token>``
(constant-time comparison), else 401 and nothing is read or stored. Bodies,
header lines and records per request are capped.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from engine.serve import otlp
from engine.serve.derive import Deriver
from engine.serve.gate import GateState, GateUnavailable, read_state
from engine.serve.handler import HookHandler
from engine.serve.hooks import PayloadError
from engine.serve.runtime import ServeRuntime

MAX_RECORDS = 10_000
MAX_HEADER_LINE = 8 * 1024
ENDPOINTS = {
    "/v1/logs": "logs",
    "/hooks/claude-code": "hooks",
    "/metrics": "metrics",
    "/healthz": "healthz",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

RUNTIME: web.AppKey[ServeRuntime] = web.AppKey("runtime", ServeRuntime)
STATE: web.AppKey[dict[str, Any]] = web.AppKey("state", dict)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


def build_app(
    runtime: ServeRuntime,
    *,
    token: str | None,
    max_body: int,
    loop_guard: int,
    collision_window_ms: int,
) -> web.Application:
    metrics = runtime.metrics
    expected = f"Bearer {token}".encode() if token else None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint = ENDPOINTS.get(request.path, "other")
        started = time.perf_counter()
        if expected is not None:
            given = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(given, expected):
                metrics.totals["unauthorized"] += 1
                metrics.observe(endpoint, 401, time.perf_counter() - started)
                return _text(401, "missing or wrong bearer token")
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status == 413:
                metrics.totals["too_large"] += 1
            metrics.observe(endpoint, exc.status, time.perf_counter() - started)
            raise
        metrics.observe(endpoint, response.status, time.perf_counter() - started)
        return response

    deriver = Deriver(loop_guard=loop_guard, collision_window_ms=collision_window_ms)
    hooks = HookHandler(deriver, runtime.writer.offer)
    seen_names: set[str] = set()

    async def read_body(request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > max_body:
            raise web.HTTPRequestEntityTooLarge(
                max_size=max_body, actual_size=request.content_length
            )
        return await request.read()  # capped by client_max_size = max_body (413)

    async def post_logs(request: web.Request) -> web.StreamResponse:
        media = otlp.media_type(request.content_type)
        if media is None:
            return _text(415, "content type must be application/x-protobuf or application/json")
        body = await read_body(request)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = otlp.gunzip(body, max_body)
            elif encoding not in ("", "identity"):
                metrics.totals["bad_requests"] += 1
                return _text(415, "Content-Encoding must be gzip or identity")
            message = otlp.decode(body, media)
        except otlp.TooLarge as exc:
            metrics.totals["too_large"] += 1
            return _text(413, str(exc))
        except otlp.BodyError as exc:
            metrics.totals["bad_requests"] += 1
            return _text(400, str(exc))
        if otlp.record_count(message) > MAX_RECORDS:
            metrics.totals["too_large"] += 1
            return _text(413, f"more than {MAX_RECORDS} log records in one request")
        result = otlp.map_request(message, deriver, _now_ms(), seen_names)
        # One offer for the request's rows (valid as the mapper builds them): one
        # lock, in order, and a full queue drops the whole remainder, counted.
        queued = runtime.writer.offer_checked(result.rows) if result.rows else 0
        dropped = len(result.rows) - queued
        for trip in result.trips:
            hooks.trips[(trip.harness, trip.run)] = trip
        metrics.records.update(result.records)
        metrics.totals["rows_queued"] += queued
        metrics.totals["rows_dropped"] += dropped
        metrics.totals["records_rejected"] += result.rejected
        reason = (
            f"{result.rejected} record(s) rejected; first: {result.first_reason}"
            if result.rejected
            else ""
        )
        content_type = otlp.PROTOBUF if media == otlp.PROTOBUF else otlp.JSON
        return web.Response(
            body=otlp.encode_response(result.rejected, reason, media), content_type=content_type
        )

    async def post_hook(request: web.Request) -> web.StreamResponse:
        body = await read_body(request)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            metrics.totals["bad_requests"] += 1
            return _text(400, "body is not JSON")
        try:
            mapped, offered = hooks.ingest(
                payload,
                harness=request.query.get("harness"),
                project=request.query.get("project"),
                now_ms=_now_ms(),
            )
        except PayloadError as exc:
            metrics.totals["bad_requests"] += 1
            return _text(400, str(exc))
        metrics.hook_events[(mapped.event, "ignored" if mapped.ignored else "journaled")] += 1
        metrics.totals["rows_queued"] += offered.queued
        metrics.totals["rows_dropped"] += offered.dropped
        metrics.totals["rows_refused"] += offered.refused
        question = hooks.gate_question(mapped)
        state = GateState()
        if question is not None:
            try:
                try:
                    state = read_state(
                        runtime.loop_reader(), mapped.harness, question[1], holds=question[0]
                    )
                except GateUnavailable as first:
                    if not first.busy:
                        raise
                    state = await asyncio.get_running_loop().run_in_executor(
                        runtime.pool,
                        lambda: read_state(
                            runtime.reader(), mapped.harness, question[1], holds=question[0]
                        ),
                    )
            except GateUnavailable as exc:
                metrics.totals["gate_errors"] += 1
                metrics.gate["error"] += 1
                return _text(503, str(exc))
        decision, answer = hooks.respond(mapped, state)
        metrics.gate[decision] += 1
        return web.json_response(answer)

    async def get_metrics(request: web.Request) -> web.StreamResponse:
        from engine.rules.metrics import collect, render_prometheus

        loop = asyncio.get_running_loop()
        try:
            store_text = await loop.run_in_executor(
                runtime.pool, lambda: render_prometheus(collect(runtime.reader()))
            )
        except Exception as exc:  # the store's figures are missing; serve's own still show
            store_text = f"# store figures unavailable: {type(exc).__name__}\n"
        return web.Response(
            text=store_text + metrics.render(), content_type="text/plain", charset="utf-8"
        )

    async def get_health(request: web.Request) -> web.StreamResponse:
        healthy, details = runtime.health()
        return web.json_response(details, status=200 if healthy else 503)

    app = web.Application(middlewares=[guard], client_max_size=max_body)
    app[RUNTIME] = runtime
    app.router.add_post("/v1/logs", post_logs)
    app.router.add_post("/hooks/claude-code", post_hook)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", get_health)
    return app
