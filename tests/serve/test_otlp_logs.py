"""Serve's map-attribute decoding accepts and reads exactly what the official messages do.

:data:`engine.serve.otlp.Logs` reads ``attributes`` as a map (the same wire
form as the official repeated KeyValue). These properties hold it to the
official ``ExportLogsServiceRequest`` on generated requests and on corrupted
bytes: the same bodies refused, every other field equal, and each attribute
map equal to the official list read with the last value of a repeated key.
"""

from __future__ import annotations

import pytest
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from engine.serve import otlp
from tests.conftest import shared_file

KEYS = st.sampled_from(["tool_name", "success", "session.id", "a", "é", "tool_input", ""])
TEXT = st.text(max_size=12)


@st.composite
def any_values(draw: st.DrawFn, depth: int = 0) -> AnyValue:
    value = AnyValue()
    kind = draw(st.sampled_from(["none", "str", "int", "bool", "bytes", "list", "kv"][: 7 - depth]))
    if kind == "str":
        value.string_value = draw(TEXT)
    elif kind == "int":
        value.int_value = draw(st.integers(-(2**63), 2**63 - 1))
    elif kind == "bool":
        value.bool_value = draw(st.booleans())
    elif kind == "bytes":
        value.bytes_value = draw(st.binary(max_size=6))
    elif kind == "list":
        value.array_value.values.add().CopyFrom(draw(any_values(depth + 2)))
    elif kind == "kv":
        kv = value.kvlist_value.values.add()
        kv.key = draw(KEYS)
        kv.value.CopyFrom(draw(any_values(depth + 2)))
    return value


def _attributes(draw: st.DrawFn, target: object) -> None:
    for _ in range(draw(st.integers(0, 6))):
        kv = target.add()  # type: ignore[attr-defined]
        kv.key = draw(KEYS)
        if draw(st.booleans()):
            kv.value.CopyFrom(draw(any_values()))


@st.composite
def requests(draw: st.DrawFn) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rl = request.resource_logs.add()
        _attributes(draw, rl.resource.attributes)
        rl.schema_url = draw(TEXT)
        for _ in range(draw(st.integers(0, 2))):
            sl = rl.scope_logs.add()
            sl.scope.name = draw(TEXT)
            for _ in range(draw(st.integers(0, 3))):
                rec = sl.log_records.add()
                rec.event_name = draw(TEXT)
                rec.severity_number = draw(st.integers(0, 24))
                rec.time_unix_nano = draw(st.integers(0, 2**64 - 1))
                rec.body.CopyFrom(draw(any_values()))
                rec.trace_id = draw(st.binary(max_size=16))
                _attributes(draw, rec.attributes)
    return request


def _last_wins(items: object) -> dict[str, bytes]:
    return {kv.key: kv.value.SerializeToString() for kv in items}  # type: ignore[attr-defined]


def _map(attrs: object) -> dict[str, bytes]:
    return {k: v.SerializeToString() for k, v in attrs.items()}  # type: ignore[attr-defined]


def assert_same(official: ExportLogsServiceRequest, logs: object) -> None:
    """Every attribute map equals the official list (last value wins); all else is equal."""
    lite_rls = logs.resource_logs  # type: ignore[attr-defined]
    assert len(lite_rls) == len(official.resource_logs)
    for rl, lite_rl in zip(official.resource_logs, lite_rls, strict=True):
        assert _map(lite_rl.resource.attributes) == _last_wins(rl.resource.attributes)
        assert len(lite_rl.scope_logs) == len(rl.scope_logs)
        for sl, lite_sl in zip(rl.scope_logs, lite_rl.scope_logs, strict=True):
            assert len(lite_sl.log_records) == len(sl.log_records)
            for rec, lite in zip(sl.log_records, lite_sl.log_records, strict=True):
                assert _map(lite.attributes) == _last_wins(rec.attributes)
    bare_official = ExportLogsServiceRequest()
    bare_official.CopyFrom(official)
    bare_lite = otlp.Logs()
    bare_lite.CopyFrom(logs)
    for message in (bare_official, bare_lite):
        for rl in message.resource_logs:  # type: ignore[attr-defined]
            rl.resource.ClearField("attributes")
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    rec.ClearField("attributes")
    assert ExportLogsServiceRequest.FromString(bare_lite.SerializeToString()) == bare_official


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_protobuf_bodies_read_the_same(request: ExportLogsServiceRequest) -> None:
    assert_same(request, otlp.decode(request.SerializeToString(), otlp.PROTOBUF))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_json_bodies_read_the_same(request: ExportLogsServiceRequest) -> None:
    body = json_format.MessageToJson(request).encode()
    assert_same(request, otlp.decode(body, otlp.JSON))


def _official_accepts(body: bytes) -> ExportLogsServiceRequest | None:
    try:
        return ExportLogsServiceRequest.FromString(body)
    except DecodeError:
        return None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests(), data=st.data())
def test_corrupted_bytes_are_refused_alike(
    request: ExportLogsServiceRequest, data: st.DataObject
) -> None:
    body = bytearray(request.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        if not body:
            break
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    body = body[: data.draw(st.integers(0, len(body)))]
    official = _official_accepts(bytes(body))
    if official is None:
        with pytest.raises(otlp.BodyError):
            otlp.decode(bytes(body), otlp.PROTOBUF)
    else:
        assert_same(official, otlp.decode(bytes(body), otlp.PROTOBUF))


@pytest.mark.parametrize(
    "name", ["codex-0.171.0_batch1_20records.pb", "codex-0.171.0_tool_result_1record.pb"]
)
def test_recorded_codex_bodies_read_the_same(name: str) -> None:
    body = shared_file(f"real-clients/{name}").read_bytes()
    assert_same(ExportLogsServiceRequest.FromString(body), otlp.decode(body, otlp.PROTOBUF))


def test_an_official_message_is_taken_as_it_is() -> None:
    request = ExportLogsServiceRequest()
    kv = request.resource_logs.add().resource.attributes.add()
    kv.key, kv.value.string_value = "harness.id", "h1"
    logs = otlp.as_logs(request)
    assert logs.resource_logs[0].resource.attributes["harness.id"].string_value == "h1"
    assert otlp.as_logs(logs) is logs
