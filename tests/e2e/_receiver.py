"""A recording OTLP/HTTP receiver and http-hook endpoint, standing in for ``harness serve``."""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from tests.e2e import record_hook
from tests.e2e._fakeserver import BackgroundServer

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@dataclass(frozen=True)
class OtlpBody:
    """One OTLP export request as it arrived: path, content type, the raw (decompressed)
    bytes, and its ``Authorization`` header (to check that exporter headers arrive)."""

    at: float
    path: str
    content_type: str
    content_encoding: str
    raw: bytes
    authorization: str = ""

    @property
    def is_json(self) -> bool:
        return "json" in self.content_type


@dataclass(frozen=True)
class LogRecord:
    """An OTLP log record, flattened: its event name (see ``event_name``), the raw
    ``event_name`` field, its attributes, its resource's attributes and its body."""

    event: str
    event_name_field: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    body: Any


@dataclass(frozen=True)
class HookCall:
    """An http hook request the receiver answered."""

    at: float
    mono: float
    path: str
    payload: Any
    answer: Any


@dataclass
class Receiver:
    """Records OTLP exports (``/v1/logs``, ``/v1/traces``, ``/v1/metrics``) and answers http
    hooks (any other POST path) with the first matching rule, as ``record_hook.py`` does.

    ``rules`` may be replaced between runs; each request reads it once.
    """

    rules: list[dict[str, Any]] = field(default_factory=list)
    bodies: list[OtlpBody] = field(default_factory=list)
    hooks: list[HookCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: BackgroundServer | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/{signal}", self._otlp)
        app.router.add_post("/{tail:.*}", self._hook)
        return app

    def __enter__(self) -> Receiver:
        self._server = BackgroundServer(self.app()).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.__exit__(*exc)

    @property
    def url(self) -> str:
        assert self._server is not None, "use the receiver as a context manager"
        return self._server.url

    def hook_url(self, tag: str = "claude-code") -> str:
        return f"{self.url}/hooks/{tag}"

    async def _otlp(self, request: web.Request) -> web.Response:
        raw = await request.read()
        encoding = request.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        body = OtlpBody(
            at=time.monotonic(),
            path=request.path,
            content_type=request.content_type or "",
            content_encoding=encoding,
            raw=raw,
            authorization=request.headers.get("Authorization", ""),
        )
        with self._lock:
            self.bodies.append(body)
        if body.is_json:
            return web.json_response({})
        return web.Response(
            body=ExportLogsServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def _hook(self, request: web.Request) -> web.Response:
        mono = time.monotonic()
        payload = await request.json()
        rule = record_hook.rule_for(list(self.rules), payload if isinstance(payload, dict) else {})
        answer = rule.get("answer", {})
        with self._lock:
            self.hooks.append(HookCall(time.time(), mono, request.path, payload, answer))
        return web.json_response(answer, status=int(rule.get("status", 200)))

    # --- reading what arrived -----------------------------------------------------------
    def log_bodies(self) -> list[OtlpBody]:
        with self._lock:
            return [b for b in self.bodies if b.path == "/v1/logs"]

    def records(self) -> list[LogRecord]:
        return [r for body in self.log_bodies() for r in decode_logs(body)]

    def events(self, name: str) -> list[LogRecord]:
        return [r for r in self.records() if r.event == name]

    def wait_for(self, predicate: Callable[[Receiver], bool], timeout_s: float = 15.0) -> bool:
        """Polls until ``predicate(self)`` holds (True) or the deadline passes (False)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.05)
        return predicate(self)

    def save_first_body(self, event: str, target: Path) -> Path | None:
        """Writes the first logs body holding ``event`` to ``target`` (suffix from its type)."""
        for body in self.log_bodies():
            if any(r.event == event for r in decode_logs(body)):
                path = target.with_suffix(".json" if body.is_json else ".pb")
                path.write_bytes(body.raw)
                return path
        return None


def decode_logs(body: OtlpBody) -> list[LogRecord]:
    """The log records of one ``/v1/logs`` body, protobuf or JSON, as OTLP/JSON dicts."""
    if body.is_json:
        document = json.loads(body.raw)
    else:
        message = ExportLogsServiceRequest.FromString(body.raw)
        document = MessageToDict(message, preserving_proto_field_name=False)
    records = []
    for resource_logs in document.get("resourceLogs", []):
        resource = _attributes(resource_logs.get("resource", {}).get("attributes", []))
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                attributes = _attributes(record.get("attributes", []))
                body_value = _value(record.get("body", {}))
                field_name = str(record.get("eventName", ""))
                event = event_name(field_name, body_value, attributes)
                records.append(LogRecord(event, field_name, attributes, resource, body_value))
    return records


def event_name(field_name: str, body: Any, attributes: dict[str, Any]) -> str:
    """The record's event name as each client puts it: the ``event_name`` field when it is an
    identifier (Codex puts a source location there), else a dotted identifier body (Claude
    Code: ``claude_code.tool_result``), else the ``event.name`` attribute (Codex, Gemini)."""
    if IDENTIFIER.fullmatch(field_name):
        return field_name
    if isinstance(body, str) and "." in body and IDENTIFIER.fullmatch(body):
        return body
    return str(attributes.get("event.name") or "")


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value", {})) for item in items}


def _value(value: dict[str, Any]) -> Any:
    if not value:
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return _attributes(value["kvlistValue"].get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None
