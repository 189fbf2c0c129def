"""OTLP/HTTP on the wire: bodies decoded with the official ``opentelemetry-proto`` classes.

Bodies are ``application/x-protobuf`` or ``application/json`` (the OTLP/JSON
mapping, decoded with ``google.protobuf.json_format`` as the specification
prescribes), optionally gzip-compressed; decompression is capped at the same
``[serve] max_body`` as the raw body, so a small bomb cannot become a large
allocation. What the records mean is :mod:`engine.serve.receiver`'s business.

A request is decoded into :data:`Logs`, the official message with one change:
a resource's and a record's ``attributes`` are read as a protobuf map (key to
AnyValue) instead of a list of KeyValue. Both have the same wire form (a map
entry *is* a message with the key as field 1 and the value as field 2), so the
bytes accepted and refused are the same; but the receiver can then ask for the
few keys it reads, in C, instead of building a Python wrapper per attribute
(an agent's record carries 15-20, and the receiver reads four or five). A
repeated key keeps its last value, as before.
"""

from __future__ import annotations

import zlib
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

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


_LITE = "harness.otlp"
_ANY_VALUE = ".opentelemetry.proto.common.v1.AnyValue"
_OURS = {resource_pb2.DESCRIPTOR.name: "harness/otlp/resource.proto"}


def _lite_file(module: Any, name: str) -> descriptor_pb2.FileDescriptorProto:
    """A copy of an official .proto file in our package, ``attributes`` fields made maps."""
    fd = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fd)
    official = "." + fd.package + "."
    fd.name, fd.package = f"harness/otlp/{name}.proto", _LITE
    fd.dependency[:] = [_OURS.get(d, d) for d in fd.dependency]
    for message in fd.message_type:
        for field in message.field:
            if field.name == "attributes":
                entry = message.nested_type.add(name="AttributesEntry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=1)
                value = entry.field.add(name="value", number=2, type=field.TYPE_MESSAGE, label=1)
                value.type_name = _ANY_VALUE
                field.type_name = f".{_LITE}.{message.name}.AttributesEntry"
            elif field.type_name.startswith((official, ".opentelemetry.proto.resource.v1.")):
                field.type_name = f".{_LITE}." + field.type_name.rsplit(".", 1)[1]
    return fd


def _lite_request() -> type[Message]:
    pool = descriptor_pool.Default()
    resource = _lite_file(resource_pb2, "resource")
    logs = _lite_file(logs_pb2, "logs")
    request = logs.message_type.add(name="ExportLogsServiceRequest")
    field = request.field.add(name="resource_logs", number=1, type=11, label=3)
    field.type_name = f".{_LITE}.ResourceLogs"
    pool.Add(resource)
    pool.Add(logs)
    cls: type[Message] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{_LITE}.ExportLogsServiceRequest")
    )
    return cls


#: ExportLogsServiceRequest with map ``attributes`` (see the module docstring).
Logs: type[Message] = _lite_request()


def as_logs(request: Message) -> Any:
    """An official ExportLogsServiceRequest (or a :data:`Logs`) as a :data:`Logs`."""
    return request if isinstance(request, Logs) else Logs.FromString(request.SerializeToString())


def decode(body: bytes, media: str) -> Any:
    """Parse an ExportLogsServiceRequest into a :data:`Logs`; BodyError when it is not one."""
    try:
        if media == PROTOBUF:
            request = Logs()
            request.ParseFromString(body)
        else:
            text = body.decode("utf-8")
            if not text.lstrip().startswith("{"):
                raise BodyError("OTLP/JSON body must be a JSON object")
            official = ExportLogsServiceRequest()
            json_format.Parse(text, official, ignore_unknown_fields=True)
            request = as_logs(official)
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


def record_count(request: Any) -> int:
    return sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
