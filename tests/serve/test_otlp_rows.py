"""Every row the OTLP receiver emits is a valid journal row, whatever the records carry.

The call book builds its tool_call rows from values that already have their
journal shape (``ident``, ``digest``, ``journal_path``, enum literals) and does
not run ``check_values`` on them, and the writer admits a ticket's rows
without a second check. This property is what makes that safe: adversarial
attribute values of every OTLP kind never yield a row that ``check_values``
would refuse.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from engine.journal.rows import check_values
from engine.serve.receiver import TOOL_RESULTS
from tests.serve._rig import Rig

# Protobuf strings are UTF-8: no lone surrogates. Control characters, newlines,
# spaces and non-ASCII text are all allowed and must never reach a row as such.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
IDENTISH = st.from_regex(r"[A-Za-z0-9._:/@+-]{1,12}", fullmatch=True)
SCALAR = st.one_of(TEXT, IDENTISH, st.integers(-(2**63), 2**63 - 1), st.booleans(),
                   st.floats(allow_nan=False), st.binary(max_size=8))  # fmt: skip
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=4,
)
JSONISH = st.recursive(
    st.one_of(TEXT, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=4,
)
PATHS = st.one_of(TEXT, st.sampled_from(["/src/a.py", "rel/b.py", "x\ny", "\x00", "p" * 5000]))
TOOL_INPUT = st.one_of(
    VALUE,
    st.builds(lambda p, v: json.dumps({"file_path": p, "x": v}), PATHS, JSONISH),
    st.builds(lambda p: f"*** Begin Patch\n*** Update File: {p}\n*** End Patch", PATHS),
)
RECORD = st.fixed_dictionaries(
    {},
    optional={
        "tool_name": st.one_of(
            st.sampled_from(["Bash", "Edit", "Write", "MultiEdit", "apply_patch", "write_file"]),
            VALUE,
        ),
        "function_name": st.one_of(st.sampled_from(["run_shell_command", "replace"]), VALUE),
        "function_args": TOOL_INPUT,
        "call_id": st.one_of(IDENTISH, VALUE),
        "error_type": st.one_of(st.sampled_from(["policy_violation", "tool_error"]), VALUE),
        "success": st.one_of(st.sampled_from(["true", "false", "TRUE"]), VALUE),
        "session.id": st.one_of(IDENTISH, VALUE),
        "conversation.id": st.one_of(IDENTISH, VALUE),
        "tool_input": TOOL_INPUT,
        "arguments": TOOL_INPUT,
        "tool_parameters": TOOL_INPUT,
        "error": VALUE,
        "output": VALUE,
        "event.name": st.one_of(st.sampled_from(sorted(TOOL_RESULTS)), VALUE),
    },
)
RESOURCE = st.fixed_dictionaries(
    {"harness.id": st.one_of(st.sampled_from(["h01", "h02"]), IDENTISH, VALUE)},
    optional={
        "harness.project": st.one_of(IDENTISH, VALUE),
        "service.name": st.sampled_from(["claude-code", "codex_exec", "gemini-cli"]),
        "session.id": st.one_of(IDENTISH, VALUE),
    },
)
NAME = st.sampled_from([*sorted(TOOL_RESULTS), "tool_result", ""])


def put(target: AnyValue, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, list):
        target.array_value.SetInParent()
        for item in value:
            put(target.array_value.values.add(), item)
    elif isinstance(value, dict):
        target.kvlist_value.SetInParent()
        for key, item in value.items():
            kv = target.kvlist_value.values.add()
            kv.key = key
            put(kv.value, item)
    else:
        target.string_value = value


def request_of(
    resources: list[tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]],
) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for resource, records in resources:
        rl = request.resource_logs.add()
        for key, value in resource.items():
            kv = rl.resource.attributes.add()
            kv.key = key
            put(kv.value, value)
        scope = rl.scope_logs.add()
        for name, attributes in records:
            rec = scope.log_records.add()
            rec.body.string_value = name
            for key, value in attributes.items():
                kv = rec.attributes.add()
                kv.key = key
                put(kv.value, value)
    return request


@settings(max_examples=150, deadline=None)
@given(
    resources=st.lists(
        st.tuples(RESOURCE, st.lists(st.tuples(NAME, RECORD), max_size=6)), min_size=1, max_size=3
    ),
    loop_guard=st.integers(0, 3),
)
def test_every_mapped_row_passes_the_journal_check(
    resources: list[tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]], loop_guard: int
) -> None:
    rig = Rig(loop_guard=loop_guard)
    request = request_of(resources)
    for now in (1_000, 2_000):  # twice: repeated calls trip the loop guard, edits collide
        rig.now = now
        before = len(rig.journal.rows)
        result = rig.receiver.receive(request)
        for row in rig.journal.rows[before:]:
            check_values(row)
        assert result.rows == len(rig.journal.rows) - before
        total = sum(len(records) for _resource, records in resources)
        assert sum(result.records.values()) == total
        assert result.rejected == sum(n for (_n, v), n in result.records.items() if v == "rejected")
