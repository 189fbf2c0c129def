"""OTLP/HTTP logs in: decode with the official ``opentelemetry-proto`` classes, map tool results.

Bodies are ``application/x-protobuf`` or ``application/json`` (the OTLP/JSON
mapping, decoded with ``google.protobuf.json_format`` as the specification
prescribes), optionally gzip-compressed; decompression is capped at the same
``[serve] max_body`` as the raw body, so a small bomb cannot become a large
allocation.

Mapping (DESIGN.md): a record's name is its ``event_name``, else its string
body, else its ``event.name`` attribute (``tool_result`` from service
``claude-code`` meaning ``claude_code.tool_result``). ``claude_code.tool_result``
and ``codex.tool_result`` become run_event tool_call rows; every other name
is accepted, ignored and counted. Identity comes from the resource
attributes ``harness.id`` and ``harness.project``; a record whose resource has
no usable ``harness.id`` is rejected and counted in ``partial_success``.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from engine.journal.rows import InsertRow, RowError
from engine.serve.canon import cause_digest, digest, digest_json_text, ident, journal_path
from engine.serve.derive import EDIT_TOOLS, PATCH_TOOLS, Deriver, LoopTrip, patch_paths

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TOOL_RESULTS = frozenset({"claude_code.tool_result", "codex.tool_result"})
MAX_NAME_LABELS = 64


class BodyError(ValueError):
    """The body cannot be decoded (HTTP 400); the message names why, never the content."""


class TooLarge(ValueError):
    """The (decompressed) body or its record count is over the cap (HTTP 413)."""


def media_type(content_type: str | None) -> str | None:
    """``application/json`` / ``application/x-protobuf`` from a Content-Type, else None."""
    if not content_type:
        return None
    base = content_type.split(";", 1)[0].strip().lower()
    return base if base in (PROTOBUF, JSON) else None


def gunzip(body: bytes, limit: int) -> bytes:
    """Decompress a gzip body, refusing more than ``limit`` bytes of output."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BodyError(f"not valid gzip: {exc}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise TooLarge(f"decompressed body is larger than {limit} bytes")
    if not d.eof:
        raise BodyError("truncated gzip stream")
    return out


def decode(body: bytes, media: str) -> ExportLogsServiceRequest:
    """Parse an ExportLogsServiceRequest; BodyError when it is not one."""
    request = ExportLogsServiceRequest()
    try:
        if media == PROTOBUF:
            request.ParseFromString(body)
        else:
            json_format.Parse(body.decode("utf-8"), request, ignore_unknown_fields=True)
    except (DecodeError, json_format.ParseError, UnicodeDecodeError, RecursionError) as exc:
        kind = "protobuf" if media == PROTOBUF else "OTLP/JSON"
        raise BodyError(
            f"not an OTLP ExportLogsServiceRequest ({kind}): {type(exc).__name__}"
        ) from None
    return request


def encode_response(rejected: int, message: str, media: str) -> bytes:
    """The ExportLogsServiceResponse in the request's encoding."""
    response = ExportLogsServiceResponse()
    if rejected or message:
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = message
    if media == PROTOBUF:
        data: bytes = response.SerializeToString()
        return data
    text: str = json_format.MessageToJson(response, indent=None)
    return text.encode("utf-8")


def value_of(v: AnyValue) -> object:
    """An OTLP AnyValue as plain Python (kvlists become dicts, arrays lists)."""
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    if which == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


#: The record attributes the mapping reads; the rest (prompts, outputs we do not
#: need, costs) are never even converted.
WANTED = frozenset(
    {
        "event.name",
        "tool_name",
        "success",
        "session.id",
        "conversation.id",
        "tool_input",
        "arguments",
        "tool_parameters",
        "error",
        "output",
    }
)


def attrs(items: object) -> dict[str, object]:
    """Attributes as a dict (a resource's: few, read once per resource)."""
    return {kv.key: value_of(kv.value) for kv in items}  # type: ignore[attr-defined]


def wanted_attrs(items: Iterable[Any]) -> dict[str, object]:
    """A record's :data:`WANTED` attributes, in one pass over its KeyValue list.

    Only these keys are converted (prompts, outputs and costs never are).
    This runs once per record, and almost every value an exporter sends is a
    string, so a non-empty ``string_value`` is taken as it is and only the
    other kinds pay for :func:`value_of` (an empty string also goes there,
    which returns it unchanged). A repeated key keeps its last value.
    """
    out: dict[str, object] = {}
    for kv in items:
        key = kv.key
        if key in WANTED:
            value = kv.value
            text = value.string_value
            out[key] = text if text else value_of(value)
    return out


@dataclass(slots=True)
class Ingest:
    """What one request did: rows to offer, per-name verdicts, rejections and the first reason."""

    rows: list[InsertRow] = field(default_factory=list)
    records: dict[tuple[str, str], int] = field(default_factory=dict)
    rejected: int = 0
    first_reason: str = ""
    trips: list[LoopTrip] = field(default_factory=list)

    def count(self, name: str, verdict: str) -> None:
        key = (name, verdict)
        self.records[key] = self.records.get(key, 0) + 1

    def reject(self, name: str, reason: str) -> None:
        self.rejected += 1
        self.count(name, "rejected")
        if not self.first_reason:
            self.first_reason = reason


def record_count(request: ExportLogsServiceRequest) -> int:
    return sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)


def event_name(record: object, rec_attrs: Mapping[str, object], service: object) -> str | None:
    name = getattr(record, "event_name", "") or None
    if name is None:
        # A non-empty string_value means the body's oneof holds a string.
        name = record.body.string_value or None  # type: ignore[attr-defined]
    if name is None:
        attr = rec_attrs.get("event.name")
        name = attr if isinstance(attr, str) and attr else None
    if name == "tool_result" and service == "claude-code":
        return "claude_code.tool_result"
    return name


def name_label(name: str | None, seen: set[str]) -> str:
    """A bounded, identifier-shaped metrics label for an event name."""
    if name is None:
        return "unnamed"
    if name in TOOL_RESULTS or (name in seen):
        return name
    if ident(name) is None or len(name) > 64 or len(seen) >= MAX_NAME_LABELS:
        return "other"
    seen.add(name)
    return name


def map_request(
    request: ExportLogsServiceRequest, deriver: Deriver, now_ms: int, seen: set[str]
) -> Ingest:
    """Map every record of ``request`` to journal-shaped rows; nothing is offered yet.

    Resource attributes (identity, service) are read once per resource rather
    than once per record, and verdicts are counted into the request's own
    dict: a request carries hundreds of records, and this loop is most of
    what serve spends on one.
    """
    out = Ingest()
    records = out.records
    rows = out.rows
    for rl in request.resource_logs:
        res = attrs(rl.resource.attributes)
        service = res.get("service.name")
        harness = ident(res.get("harness.id"))
        project_raw = res.get("harness.project")
        project = ident(project_raw)
        identity = (
            None
            if harness is None
            else _Identity(harness, project, project_raw is not None and project is None)
        )
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                rec_attrs = wanted_attrs(rec.attributes)
                name = event_name(rec, rec_attrs, service)
                label = name if name in TOOL_RESULTS else name_label(name, seen)
                if identity is None:
                    out.reject(label, "resource attribute harness.id missing or not an identifier")
                    continue
                if name not in TOOL_RESULTS:
                    key = (label, "ignored")
                    records[key] = records.get(key, 0) + 1
                    continue
                try:
                    new_rows, trip = _tool_result(rec_attrs, res, identity, deriver, now_ms)
                except RowError as exc:
                    out.reject(label, f"{exc.field}: not a journal value")
                    continue
                rows.extend(new_rows)
                if trip is not None:
                    out.trips.append(trip)
                key = (label, "admitted")
                records[key] = records.get(key, 0) + 1
    return out


@dataclass(frozen=True, slots=True)
class _Identity:
    """A resource's identity, checked once for all of its records."""

    harness: str
    project: str | None
    bad_project: bool


def _get(a: Mapping[str, object], res: Mapping[str, object], *keys: str) -> object:
    for key in keys:
        if key in a:
            return a[key]
        if key in res:
            return res[key]
    return None


#: The C scanner behind ``json.loads``: called directly it skips two regex
#: whitespace scans and three Python frames per call (serve parses one tool
#: input per record). Stateless between calls (it clears its memo).
_scan_once: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_loads(text: str) -> object:
    """Exactly ``json.loads(text)`` for a str, faster when it is one JSON value and nothing else.

    A document that starts with its value and ends with it (what exporters
    send) is read by the scanner alone; anything else (leading or trailing
    whitespace, extra data, no value, a BOM) goes through ``json.loads``, which
    then returns the same value or raises the same error it always did.
    """
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _args(a: Mapping[str, object]) -> tuple[str | None, object]:
    """(args digest, parsed arguments) from tool_input / arguments / tool_parameters."""
    for key in ("tool_input", "arguments", "tool_parameters"):
        if key not in a:
            continue
        value = a[key]
        if isinstance(value, str):
            try:
                parsed: object = _json_loads(value)
            except (ValueError, RecursionError):
                return digest_json_text(value), value
            return digest(parsed), parsed
        return digest(value), value
    return None, None


#: The tools whose arguments name paths; any other tool has none (skips a call per record).
_PATH_TOOLS = EDIT_TOOLS | PATCH_TOOLS


def _paths(tool: str, parsed: object) -> list[str]:
    found: list[str] = []
    if tool in EDIT_TOOLS and isinstance(parsed, Mapping):
        for key in ("file_path", "notebook_path"):
            path = journal_path(parsed.get(key))
            if path is not None:
                found.append(path)
    elif tool in PATCH_TOOLS:
        texts = parsed.values() if isinstance(parsed, Mapping) else [parsed]
        for text in texts:
            for p in patch_paths(text):
                path = journal_path(p)
                if path is not None and path not in found:
                    found.append(path)
    return found


def _tool_result(
    a: Mapping[str, object],
    res: Mapping[str, object],
    who: _Identity,
    deriver: Deriver,
    now_ms: int,
) -> tuple[list[InsertRow], LoopTrip | None]:
    tool = ident(a.get("tool_name"))
    if tool is None:
        raise RowError("tool", "missing")
    harness, project = who.harness, who.project
    if who.bad_project:
        raise RowError("project", "not an identifier")
    run_raw = _get(a, res, "session.id", "conversation.id")
    run = ident(run_raw)
    if run_raw is not None and run is None:
        raise RowError("run", "not an identifier")
    success = a.get("success")
    ok = success is True or (isinstance(success, str) and success.lower() == "true")
    outcome = None if success is None else ("ok" if ok else "error")
    args, parsed = _args(a)
    cause = None
    if outcome == "error":
        cause = cause_digest(a.get("error") if "error" in a else a.get("output"))
    paths = _paths(tool, parsed) if tool in _PATH_TOOLS else []
    # The tool_call row in INSERT_COLUMNS order: what make_row would build, but
    # without its keyword plumbing and without check_values, because every
    # value is already of its journal shape by construction: identifiers
    # passed ident() (the journal's own pattern), the outcome is an enum
    # literal, digests come from digest(), the path from journal_path() (the
    # journal's path rule). tests/serve/test_otlp_rows.py checks every row the
    # mapper emits against check_values on adversarial records; the queue
    # admits these rows without a second check (offer_checked).
    row = (
        0,
        "run_event",
        "tool_call",
        "observer",
        harness,
        project,
        run,
        tool,
        outcome,
        paths[0] if paths else None,
        cause,
        args,
        None,
        None,
        None,
    )
    rows: list[InsertRow] = [row]
    if paths and outcome != "error":
        rows.extend(
            deriver.edits(harness=harness, project=project, run=run, paths=paths, now_ms=now_ms)
        )
    loop_rows, trip = deriver.loop(
        harness=harness, project=project, run=run, tool=tool, args_digest=args
    )
    rows.extend(loop_rows)
    return rows, trip
