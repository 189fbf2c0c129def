"""A value nested to any depth ``json.loads`` accepts digests, and digests the same from any frame.

Issue 22: serve parsed a tool input nested ~972 deep (the parse is guarded),
then ``canonical_json`` overflowed the stack re-encoding it a few frames
deeper: HTTP 500 on ``POST /v1/logs``, exit 70 from ``harness hook``. The
failing window is one or two depths wide and moves with the caller's stack,
so these tests sweep every depth and call the digest from deeper frames than
the parse on purpose; and since a digest must not depend on where it was
computed, the text built without recursion must equal the C encoder's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import given, settings

from engine.serve import canon
from tests.fuzz.conftest import depth_sweep
from tests.fuzz.strategies import DEEPEST, NESTING_KINDS, nested_json
from tests.serve.test_canon import REFERENCE, json_values

T = TypeVar("T")
#: How many frames deeper than the parse the digest is taken (serve's gap was ~10, the hook's ~4).
GAPS = (0, 8, 30)


def _from_deeper(frames: int, fn: Callable[[T], str], arg: T) -> str:
    """``fn(arg)`` called ``frames`` Python frames below the caller."""
    return fn(arg) if frames <= 0 else _from_deeper(frames - 1, fn, arg)


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@pytest.mark.parametrize("kind", NESTING_KINDS)
def test_every_depth_json_loads_accepts_digests_from_deeper_frames(kind: str) -> None:
    """The regression sweep: every depth from 1 to past the recursion limit, each gap."""
    parsed = 0
    for depth in depth_sweep(DEEPEST, band=60):  # the window is within GAPS[-1] of the top
        text = nested_json(depth, kind)
        try:
            value = json.loads(text)
        except RecursionError:
            continue  # serve hashes such text as a string (digest_json_text); nothing to re-encode
        parsed = depth
        for gap in GAPS:
            # Nested lists and single-key objects are already canonical: the digest is the text's.
            assert _from_deeper(gap, canon.digest, value) == _sha(text), (depth, gap)
    assert parsed > 900  # the sweep did reach the deep values it is about


@pytest.mark.parametrize("kind", NESTING_KINDS)
def test_digest_json_text_never_raises_at_any_depth(kind: str) -> None:
    for depth in depth_sweep(DEEPEST):
        text = nested_json(depth, kind)
        digest = _from_deeper(25, canon.digest_json_text, text)
        assert digest in (_sha(text), _sha(json.dumps(text, ensure_ascii=False)))


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_the_recursion_free_text_is_the_encoders_text(value: object) -> None:
    assert canon._canonical_iterative(value) == REFERENCE.encode(value)


@settings(max_examples=50, deadline=None)
@given(json_values)
def test_canonical_json_at_the_top_of_the_stack_still_gives_the_encoders_text(
    value: object,
) -> None:
    """With 40 frames left the C encoder overflows on this value; the text is the same."""
    deep: object = value
    for i in range(60):
        deep = [deep] if i % 2 else {"k": deep, "j": i}
    expected = REFERENCE.encode(deep)
    assert _at_the_top(40, canon.canonical_json, deep) == expected


def _at_the_top(frames_left: int, fn: Callable[[T], str], arg: T) -> str:
    """``fn(arg)`` called with only ``frames_left`` frames left under the recursion limit."""
    depth, frame = 0, sys._getframe()
    while frame.f_back is not None:
        depth, frame = depth + 1, frame.f_back
    return _from_deeper(sys.getrecursionlimit() - depth - frames_left, fn, arg)


def test_a_circular_value_is_a_value_error_not_a_recursion_error() -> None:
    loop: list[object] = []
    loop.append({"again": loop})
    with pytest.raises(ValueError, match="Circular"):
        canon.canonical_json(loop)


def test_an_unencodable_value_is_the_encoders_type_error_on_both_paths() -> None:
    deep: object = {"x": object()}
    with pytest.raises(TypeError, match="not JSON serializable"):
        canon.canonical_json(deep)
    for _ in range(2000):
        deep = [deep]
    with pytest.raises(TypeError, match="not JSON serializable"):
        canon.canonical_json(deep)
