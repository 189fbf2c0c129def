"""Fuzz surface: serve's two endpoints through the real HTTP stack (issue 18).

A real ``harness serve`` subprocess (one per module) gets hook payloads and
OTLP bodies: mutated real payloads, arbitrary JSON, protobuf and OTLP/JSON
built from hostile attribute values, raw bytes, gzip (whole or truncated),
right and wrong content types. Properties, per request:

- the answer is a 2xx or a 4xx (a 503 only while the store cannot be
  written, which never happens here, so never);
- a refused (4xx) request adds no row to the journal;
- a 200 OTLP answer is an ``ExportLogsServiceResponse`` in the request's encoding;

and for the whole run, serve's log holds no traceback and no error line.
"""

from __future__ import annotations

import gzip
import http.client
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.strategies import NEAR_STRINGS, json_values, raw_lines
from tests.serve.conftest import FIXTURES, Serve, start_serve

AGENTS = ("claude-code", "codex", "gemini")
HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "PostToolUseFailure", "Notification", "Stop", "SubagentStop", "PreCompact", "SessionEnd",
    "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "BeforeModel", "PreCompress",
)  # fmt: skip
TOOLS = ("Bash", "Edit", "Write", "MultiEdit", "NotebookEdit", "Read", "apply_patch", "shell")
PAYLOADS = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]
ATTR_KEYS = (
    "tool_name", "function_name", "success", "session.id", "conversation.id", "call_id",
    "tool_input", "arguments", "function_args", "event.name", "error", "error_type",
    "decision", "output", "duration_ms", "tool_parameters", "file_path",
)  # fmt: skip
RESOURCE_KEYS = ("service.name", "harness.id", "harness.project", "host.name")
EVENT_NAMES = (
    "claude_code.tool_result", "codex.tool_result", "gemini_cli.tool_call", "tool_result",
    "claude_code.api_request", "codex.sse_event", "x.y", "",
)  # fmt: skip
CONTENT_TYPES = (
    "application/x-protobuf", "application/json", "application/json; charset=utf-8",
    "text/plain", "application/x-www-form-urlencoded", "", "application/protobuf",
)  # fmt: skip


def mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five: the accepted paths need examples too, not only refusals."""
    return st.integers(0, 4).flatmap(lambda k: other if k == 4 else usual)


_VALID_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,11}", fullmatch=True)
_BAD_IDS = st.sampled_from(["--all", "-x", "", "a b", "x" * 257, "a\x00", "é"])
harness_ids = mostly(_VALID_IDS, st.one_of(_BAD_IDS, st.text(max_size=12)))
texts = st.one_of(st.sampled_from(NEAR_STRINGS), st.text(max_size=30))
proto_harness_ids = mostly(
    _VALID_IDS,
    st.one_of(_BAD_IDS, st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)),
)
#: Text a protobuf string can hold (UTF-8: no lone surrogates).
_NO_SURROGATES = st.characters(blacklist_categories=("Cs",))
proto_texts = st.one_of(
    st.sampled_from([t for t in NEAR_STRINGS if not any(0xD800 <= ord(c) < 0xE000 for c in t)]),
    st.text(alphabet=_NO_SURROGATES, max_size=30),
)
proto_keys = st.text(alphabet=_NO_SURROGATES, max_size=8)


# -- hook payloads ---------------------------------------------------------------------------


@st.composite
def hook_payloads(draw: Any) -> object:
    """A real payload with fields replaced or added, or anything JSON at all."""
    if draw(st.integers(0, 4)) == 4:
        return draw(json_values)
    payload: dict[str, object] = dict(draw(st.sampled_from(PAYLOADS)))
    for _ in range(draw(st.integers(0, 4))):
        key = draw(
            st.one_of(
                st.sampled_from(
                    [
                        "session_id",
                        "hook_event_name",
                        "tool_name",
                        "tool_input",
                        "tool_response",
                        "cwd",
                        "tool_use_id",
                        "prompt",
                        "error",
                    ]
                ),
                st.text(max_size=8),
            )
        )
        payload[key] = draw(
            st.one_of(
                json_values,
                st.sampled_from(HOOK_EVENTS),
                st.sampled_from(TOOLS),
                st.fixed_dictionaries(
                    {"file_path": texts, "command": texts, "notebook_path": texts}
                ),
            )
        )
    return payload


hook_bodies = mostly(
    hook_payloads().map(lambda p: json.dumps(p, allow_nan=True).encode()),
    st.one_of(raw_lines.map(lambda s: s.encode("utf-8", "surrogatepass")), st.binary(max_size=64)),
)


# -- OTLP bodies -------------------------------------------------------------------------------


@st.composite
def any_values(draw: Any, depth: int = 0) -> AnyValue:
    value = AnyValue()
    kind = draw(st.integers(0, 6 if depth < 2 else 4))
    if kind == 0:
        value.string_value = draw(proto_texts)
    elif kind == 1:
        value.int_value = draw(st.integers(-(2**63), 2**63 - 1))
    elif kind == 2:
        value.double_value = draw(st.floats(allow_nan=True, allow_infinity=True))
    elif kind == 3:
        value.bool_value = draw(st.booleans())
    elif kind == 4:
        value.bytes_value = draw(st.binary(max_size=16))
    elif kind == 5:
        for _ in range(draw(st.integers(0, 3))):
            value.array_value.values.append(draw(any_values(depth + 1)))
    else:
        for _ in range(draw(st.integers(0, 3))):
            kv = value.kvlist_value.values.add()
            kv.key = draw(proto_keys)
            kv.value.CopyFrom(draw(any_values(depth + 1)))
    return value


def _attribute(draw: Any, into: Any, keys: tuple[str, ...]) -> None:
    kv = into.add()
    kv.key = draw(st.one_of(st.sampled_from(keys), proto_keys))
    if draw(st.booleans()):
        kv.value.string_value = draw(
            st.one_of(
                proto_texts,
                st.sampled_from(["true", "false", '{"command": "ls"}', "harness01", "s1"]),
                st.sampled_from(EVENT_NAMES),
                st.sampled_from(TOOLS),
            )
        )
    else:
        kv.value.CopyFrom(draw(any_values()))


@st.composite
def otlp_requests(draw: Any) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rl = request.resource_logs.add()
        if draw(st.integers(0, 3)):  # mostly a usable harness.id
            kv = rl.resource.attributes.add()
            kv.key, kv.value.string_value = "harness.id", draw(proto_harness_ids)
        for _ in range(draw(st.integers(0, 2))):
            _attribute(draw, rl.resource.attributes, RESOURCE_KEYS)
        for _ in range(draw(st.integers(0, 2))):
            scope = rl.scope_logs.add()
            for _ in range(draw(st.integers(0, 3))):
                rec = scope.log_records.add()
                if draw(st.integers(0, 3)):
                    rec.event_name = draw(mostly(st.sampled_from(EVENT_NAMES), proto_texts))
                if draw(st.integers(0, 3)):  # mostly a call serve can journal
                    for key, value in (
                        ("tool_name", draw(st.sampled_from(TOOLS))),
                        ("session.id", draw(st.sampled_from(["s1", "s2", "conv-9"]))),
                        ("success", draw(st.sampled_from(["true", "false"]))),
                    ):
                        kv = rec.attributes.add()
                        kv.key, kv.value.string_value = key, value
                if draw(st.booleans()):
                    rec.body.CopyFrom(draw(any_values()))
                rec.time_unix_nano = draw(st.integers(0, 2**64 - 1))
                for _ in range(draw(st.integers(0, 5))):
                    _attribute(draw, rec.attributes, ATTR_KEYS)
    return request


@st.composite
def otlp_bodies(draw: Any) -> tuple[bytes, str, bool]:
    """(body, content type, gzip?)."""
    form = draw(st.integers(0, 4))
    if form <= 1:
        request = draw(otlp_requests())
        if form == 0:
            body, ctype = request.SerializeToString(), "application/x-protobuf"
        else:
            body, ctype = json_format.MessageToJson(request).encode(), "application/json"
    elif form == 2:
        body = json.dumps(draw(json_values), allow_nan=True).encode()
        ctype = "application/json"
    elif form == 3:
        body, ctype = draw(st.binary(max_size=128)), "application/x-protobuf"
    else:
        body = draw(raw_lines).encode("utf-8", "surrogatepass")
        ctype = "application/json"
    if draw(st.integers(0, 5)) == 5:
        ctype = draw(st.sampled_from(CONTENT_TYPES))
    zipped = draw(st.integers(0, 3)) == 3
    if zipped:
        body = gzip.compress(body)
        if draw(st.integers(0, 3)) == 3:
            body = body[: draw(st.integers(0, len(body)))]  # truncated
    return body, ctype, zipped


# -- the server --------------------------------------------------------------------------------


class Client:
    """One keep-alive connection to serve, and the journal's row count."""

    def __init__(self, server: Serve) -> None:
        self.server = server
        #: (path kind, status) -> answers, printed at the end (pytest -s)
        self.answers: Counter[tuple[str, int]] = Counter()
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        for attempt in range(2):
            try:
                self.conn.request("POST", path, body, headers)
                resp = self.conn.getresponse()
                self.answers[(path.split("?")[0], resp.status)] += 1
                return resp.status, resp.read()
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()  # serve closed it after a 4xx: one new connection
                self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def rows(self) -> int:
        conn = sqlite3.connect(f"file:{self.server.store}?mode=ro", uri=True)
        try:
            return int(
                conn.execute("SELECT COUNT(*) FROM rule_journal WHERE kind != 'tick'").fetchone()[0]
            )
        finally:
            conn.close()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    server = start_serve(tmp_path_factory.mktemp("fuzz-http"))
    c = Client(server)
    try:
        yield c
    finally:
        c.conn.close()
        server.stop()
        print(f"\n[fuzz-http] answers by endpoint and status: {sorted(c.answers.items())}")
        print(f"[fuzz-http] rows stored: {c.rows()}")
        assert_clean_log(server.log)


def assert_clean_log(log: Path) -> None:
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if "listening on" not in line]
    assert "Traceback" not in text, text[-3000:]
    assert not [line for line in lines if " error: " in line or "Error" in line], lines[:10]


def check_answer(client: Client, status: int, before: int, answer: bytes) -> None:
    assert 200 <= status < 300 or 400 <= status < 500, (status, answer[:300])
    if status >= 400:
        assert client.rows() == before, f"a refused request ({status}) stored rows"


@fuzz_settings()
@given(
    agent=st.sampled_from(AGENTS),
    harness=mostly(harness_ids, st.none()),
    project=st.one_of(st.none(), harness_ids),
    body=hook_bodies,
    ctype=mostly(st.just("application/json"), st.sampled_from(CONTENT_TYPES)),
)
def test_hooks_answer_2xx_or_4xx_and_refusals_store_nothing(
    client: Client, agent: str, harness: str | None, project: str | None, body: bytes, ctype: str
) -> None:
    from urllib.parse import urlencode

    query = urlencode(
        {k: v for k, v in (("harness", harness), ("project", project)) if v is not None},
        encoding="utf-8",
        errors="surrogatepass",
    )
    before = client.rows()
    status, answer = client.post(f"/hooks/{agent}?{query}", body, {"Content-Type": ctype})
    check_answer(client, status, before, answer)
    if status == 200:
        assert isinstance(json.loads(answer), dict)


@fuzz_settings()
@given(otlp_bodies())
def test_otlp_answers_2xx_or_4xx_and_refusals_store_nothing(
    client: Client, case: tuple[bytes, str, bool]
) -> None:
    body, ctype, zipped = case
    headers = {"Content-Type": ctype}
    if zipped:
        headers["Content-Encoding"] = "gzip"
    before = client.rows()
    status, answer = client.post("/v1/logs", body, headers)
    check_answer(client, status, before, answer)
    if status == 200:
        if ctype.startswith("application/json"):
            json_format.Parse(answer, ExportLogsServiceResponse())
        else:
            ExportLogsServiceResponse.FromString(answer)


def test_the_log_is_clean_after_the_fuzzing(client: Client) -> None:
    assert_clean_log(client.server.log)
