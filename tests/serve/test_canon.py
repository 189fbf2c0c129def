"""Canonical JSON: the prebuilt C encoder writes exactly what ``json.JSONEncoder`` would.

Every ``args_digest`` and ``cause_digest`` in the journal is a hash of this
text, so a single differing byte would split one tool call into two digests
between an old store and a new serve.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.serve import canon

REFERENCE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_json_matches_the_stdlib_encoder(value: object) -> None:
    assert canon.canonical_json(value) == REFERENCE.encode(value)


def test_canonical_json_edge_values() -> None:
    for value in ("x", "\ud800", {"b": 1, "a": [-0.0, 1e300, 10**30]}, {1: 2, 2: 3}, [], {}):
        assert canon.canonical_json(value) == REFERENCE.encode(value)
    text = '{"command": "make t1", "env": {"B": "2", "A": "1"}}'
    assert canon.digest_json_text(text) == canon.digest(json.loads(text))
    assert canon.canonical_json(json.loads(text)) == '{"command":"make t1","env":{"A":"1","B":"2"}}'


def test_a_value_that_is_not_json_is_a_type_error_and_leaves_no_state() -> None:
    for bad in ({"a": object()}, {1: 2, "a": 3}):
        try:
            canon.canonical_json(bad)
        except TypeError:
            pass
        else:  # pragma: no cover - the assertion is the point
            raise AssertionError("expected TypeError")
    assert canon.canonical_json({"a": [1]}) == '{"a":[1]}'


def _loads_outcome(fn: object, text: str) -> tuple[str, object]:
    try:
        value = fn(text)  # type: ignore[operator]
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", json.dumps(value, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(
    json_values.map(json.dumps)
    | st.text(alphabet=' \t\n\r{}[]":,0123456789.eE+-truefalsnNaIiy\ufeff\\', max_size=30)
)
def test_the_mappers_json_reader_is_json_loads(text: str) -> None:
    from engine.serve.receiver import _json_loads

    assert _loads_outcome(_json_loads, text) == _loads_outcome(json.loads, text)


def test_the_mappers_json_reader_on_edge_documents() -> None:
    from engine.serve.receiver import _json_loads

    for text in (
        "",
        " ",
        '{"a": 1} ',
        ' {"a": 1}',
        '{"a": 1}x',
        "\ufeff{}",
        "[1,",
        "NaN",
        "1 2",
        '"s"',
    ):
        assert _loads_outcome(_json_loads, text) == _loads_outcome(json.loads, text), text
