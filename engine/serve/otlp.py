"""OTLP/HTTP on the wire: bodies decoded with the official ``opentelemetry-proto`` classes.

Bodies are ``application/x-protobuf`` or ``application/json`` (the OTLP/JSON
mapping, decoded with ``google.protobuf.json_format`` as the specification
prescribes), optionally gzip-compressed; decompression is capped at the same
``[serve] max_body`` as the raw body, so a small bomb cannot become a large
allocation. What the records mean is :mod:`engine.serve.receiver`'s business.
"""

from __future__ import annotations

import zlib

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


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
            text = body.decode("utf-8")
            if not text.lstrip().startswith("{"):
                raise BodyError("OTLP/JSON body must be a JSON object")
            json_format.Parse(text, request, ignore_unknown_fields=True)
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


def record_count(request: ExportLogsServiceRequest) -> int:
    return sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
