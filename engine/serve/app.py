"""The HTTP transport of ``harness serve``: routes that move bytes to the use cases and back.

Endpoints (DESIGN.md "Real agents"):

- ``POST /v1/logs``: OTLP/HTTP logs (protobuf or JSON, optional gzip) ->
  ``ExportLogsServiceResponse`` with ``partial_success`` for rejected
  records, once the rows are committed; 400 undecodable, 413 over
  ``[serve] max_body`` or too many records, 415 another content type, 503
  with ``Retry-After`` when the store cannot be written.
- ``POST /v1/traces``, ``POST /v1/metrics``: accepted and ignored (Gemini
  CLI exports all three signals to one endpoint), counted.
- ``POST /hooks/<agent>?harness=ID&project=NAME`` for ``claude-code``,
  ``codex`` and ``gemini``: a hook payload -> the event's JSON answer from
  holds and stops; 503 with the reason when the store cannot be used.
- ``GET /metrics``: the ``harness metrics`` families plus serve's own.
- ``GET /healthz``: 200 when the writer writes and the evaluator evaluates,
  else 503 and why.

What each request means is decided elsewhere: hooks by
:class:`~engine.serve.handler.HookHandler`, logs by
:class:`~engine.serve.receiver.OtlpReceiver` (both wrapped by
:mod:`.instrument` for metrics), which run on serve's worker threads because
they wait for their commit. Security: with a token every request needs
``Authorization: Bearer <token>`` (constant-time comparison), else 401 and
nothing is read or stored. Bodies, header lines and records per request are
capped.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from urllib.parse import unquote

from aiohttp import web

from engine.serve import otlp
from engine.serve.agents import AGENTS
from engine.serve.forward import STORE_HEADER
from engine.serve.instrument import MeteredHooks, MeteredReceiver
from engine.serve.metrics import ServeMetrics
from engine.serve.runtime import ServeRuntime

MAX_RECORDS = 10_000
MAX_HEADER_LINE = 8 * 1024
#: Seconds an OTLP exporter is asked to wait before retrying a 503.
RETRY_AFTER_S = 2
ENDPOINTS = {
    "/v1/logs": "logs",
    "/v1/traces": "traces",
    "/v1/metrics": "otlp_metrics",
    **{f"/hooks/{agent}": "hooks" for agent in AGENTS},
    "/metrics": "metrics",
    "/healthz": "healthz",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

RUNTIME: web.AppKey[ServeRuntime] = web.AppKey("runtime", ServeRuntime)


def _text(status: int, message: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", headers=headers or None)


def same_store(given: str, store: Path) -> bool:
    """Whether a forwarding hook's store is this serve's (both resolved, links followed)."""
    return os.path.realpath(given) == os.path.realpath(store)


def guard(
    token: str | None, metrics: ServeMetrics, hosts: frozenset[str] | None
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware: who may ask first, then timing and status counts per endpoint.

    With a token, a request without it is 401. Without one (a loopback
    listener), a web page in the operator's browser could still reach serve:
    a request with an ``Origin`` header, or a ``Host`` that is neither the
    listen address nor localhost (DNS rebinding), is 403.
    """
    expected = f"Bearer {token}".encode() if token else None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint = ENDPOINTS.get(request.path, "other")
        started = time.perf_counter()
        refusal = _refusal(request, expected, hosts)
        if refusal is not None:
            status, reason, counter = refusal
            metrics.add(counter)
            metrics.observe(endpoint, status, time.perf_counter() - started)
            return _text(status, reason)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status == 413:
                metrics.add("too_large")
            metrics.observe(endpoint, exc.status, time.perf_counter() - started)
            raise
        except sqlite3.Error as exc:  # a store fault no use case caught: "not now", never a 500
            metrics.add("store_unavailable")
            metrics.observe(endpoint, 503, time.perf_counter() - started)
            return _text(503, f"cannot use the store: {exc}", **{"Retry-After": str(RETRY_AFTER_S)})
        metrics.observe(endpoint, response.status, time.perf_counter() - started)
        return response

    return middleware


def _refusal(
    request: web.Request, expected: bytes | None, hosts: frozenset[str] | None
) -> tuple[int, str, str] | None:
    """(status, reason, counter) when the request may not be served, else None."""
    if expected is not None:
        given = request.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, expected):
            return 401, "missing or wrong bearer token", "unauthorized"
        return None
    if "Origin" in request.headers:
        return 403, "cross-origin requests are refused", "cross_site"
    if hosts is not None:
        host = (request.host or "").lower()
        name = host[1 : host.index("]")] if host.startswith("[") and "]" in host else host
        name = name.rsplit(":", 1)[0] if not host.startswith("[") else name
        if name not in hosts:
            return 403, "Host is not this listener's address or localhost", "cross_site"
    return None


class Routes:
    """The request handlers, named: each reads its request and hands it on."""

    def __init__(self, runtime: ServeRuntime, max_body: int) -> None:
        self.runtime = runtime
        self.metrics = runtime.metrics
        self.hooks = MeteredHooks(runtime.hooks, runtime.metrics)
        self.receiver = MeteredReceiver(runtime.receiver, runtime.metrics)
        self.max_body = max_body

    async def _body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > self.max_body:
            raise web.HTTPRequestEntityTooLarge(
                max_size=self.max_body, actual_size=request.content_length
            )
        return await request.read()  # capped by client_max_size = max_body (413)

    async def post_logs(self, request: web.Request) -> web.StreamResponse:
        media = otlp.media_type(request.content_type)
        if media is None:
            return _text(415, "content type must be application/x-protobuf or application/json")
        body = await self._body(request)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = otlp.gunzip(body, self.max_body)
            elif encoding not in ("", "identity"):
                self.metrics.add("bad_requests")
                return _text(415, "Content-Encoding must be gzip or identity")
            message = otlp.decode(body, media)
        except otlp.TooLarge as exc:
            self.metrics.add("too_large")
            return _text(413, str(exc))
        except otlp.BodyError as exc:
            self.metrics.add("bad_requests")
            return _text(400, str(exc))
        if otlp.record_count(message) > MAX_RECORDS:
            self.metrics.add("too_large")
            return _text(413, f"more than {MAX_RECORDS} log records in one request")
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.runtime.pool, self.receiver.receive, message)
        if reply.status != 200:
            return _text(503, reply.text, **{"Retry-After": str(RETRY_AFTER_S)})
        reason = (
            f"{reply.rejected} record(s) rejected; first: {reply.first_reason}"
            if reply.rejected
            else ""
        )
        return web.Response(
            body=otlp.encode_response(reply.rejected, reason, media),
            content_type=otlp.PROTOBUF if media == otlp.PROTOBUF else otlp.JSON,
        )

    async def post_ignored(self, request: web.Request) -> web.StreamResponse:
        """Traces and metrics: read, counted, answered with an empty success."""
        media = otlp.media_type(request.content_type)
        if media is None:
            return _text(415, "content type must be application/x-protobuf or application/json")
        await self._body(request)
        self.metrics.add(f"ignored_{ENDPOINTS[request.path]}")
        return web.Response(
            body=b"" if media == otlp.PROTOBUF else b"{}",
            content_type=otlp.PROTOBUF if media == otlp.PROTOBUF else otlp.JSON,
        )

    async def post_hook(self, agent: str, request: web.Request) -> web.StreamResponse:
        if request.content_type != "application/json":
            self.metrics.add("bad_requests")
            return _text(415, "content type must be application/json")
        forwarded_for = request.headers.get(STORE_HEADER)
        if forwarded_for is not None and not same_store(unquote(forwarded_for), self.runtime.store):
            return _text(409, "this serve journals another store")
        body = await self._body(request)
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            self.metrics.add("bad_requests")
            return _text(400, "body is not JSON")
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(
            self.runtime.pool,
            partial(
                self.hooks.handle,
                agent,
                payload,
                harness=request.query.get("harness"),
                project=request.query.get("project"),
            ),
        )
        if reply.status != 200:
            return _text(reply.status, reply.text)
        return web.json_response(reply.answer)

    async def get_metrics(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        try:
            store_text = await loop.run_in_executor(self.runtime.pool, self.runtime.store_metrics)
        except Exception as exc:  # the store's figures are missing; serve's own still show
            store_text = f"# store figures unavailable: {type(exc).__name__}\n"
        return web.Response(
            text=store_text + self.metrics.render(), content_type="text/plain", charset="utf-8"
        )

    async def get_health(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        healthy, details = await loop.run_in_executor(self.runtime.pool, self.runtime.health)
        return web.json_response(details, status=200 if healthy else 503)


def build_app(
    runtime: ServeRuntime,
    *,
    token: str | None,
    max_body: int,
    allowed_hosts: frozenset[str] | None = None,
) -> web.Application:
    """The aiohttp application over ``runtime``'s use cases.

    ``allowed_hosts``: the Host names a token-less listener answers to (None:
    any, for tests that run the app in-process).
    """
    routes = Routes(runtime, max_body)
    app = web.Application(
        middlewares=[guard(token, runtime.metrics, allowed_hosts)], client_max_size=max_body
    )
    app[RUNTIME] = runtime
    app.router.add_post("/v1/logs", routes.post_logs)
    app.router.add_post("/v1/traces", routes.post_ignored)
    app.router.add_post("/v1/metrics", routes.post_ignored)
    for agent in AGENTS:
        app.router.add_post(f"/hooks/{agent}", partial(routes.post_hook, agent))
    app.router.add_get("/metrics", routes.get_metrics)
    app.router.add_get("/healthz", routes.get_health)
    return app
