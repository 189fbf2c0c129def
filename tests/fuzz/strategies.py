"""Hostile-input strategies shared by the fuzz modules: JSON values, text, YAML scalars.

The values are chosen from what found the crashes of issue 13: containers
where strings belong, integers past every limit, lone surrogates, deep
nesting, explicit YAML tags, leading zeros, byte order marks and NULs.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Strings that look like what a field wants, and strings that only nearly do.
NEAR_STRINGS = [
    "h1", "tool_call", "run_event", "ok", "error", "observer", "sha256:" + "a" * 64,
    "sha256:" + "A" * 64, "a/b.py", "", " ", "\x00", "\ud800", "\udfff", "\u00e9", "x" * 257,
    "p" * 5000, "\n", "012", "0x1F", "1e999", "NaN", "true", "null", "tick",
]  # fmt: skip

big_ints = st.one_of(
    st.integers(),
    st.sampled_from([2**31, -(2**31) - 1, 2**63, 2**64, -(2**63) - 1, 2**128, 10**40]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    big_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(NEAR_STRINGS),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


#: Whole lines that are not a JSON value built by json.dumps.
raw_lines = st.one_of(
    st.text(max_size=80),
    st.integers(min_value=1, max_value=20_000).map(lambda n: deep(n)),
    st.integers(min_value=60, max_value=6_000).map(lambda n: "9" * n),
    st.integers(min_value=1, max_value=3_000).map(lambda n: '{"a":' + deep(n) + "}"),
    st.sampled_from(['"\\ud800"', '{"\\udfff": []}', "[1,", "{", '{"type": "tool_call",}']),
)


def json_line(value: Any) -> str:
    """``value`` as one JSON line (ASCII, so a lone surrogate is an escape)."""
    return json.dumps(value, allow_nan=True)


#: YAML scalars that stress resolution (tags, leading zeros, huge numbers).
YAML_SCALARS = [
    "012", "-012", "00", "0x", "0xZZ", "0x" + "f" * 60, "0o9", "0b2", "!!int abc", "!!int 0x",
    "!!float", "!!float abc", "!!bool maybe", "!!null x", "!!str 12", "!!binary aGk=",
    "!!timestamp 2001-12-14", "!custom x", "9" * 5000, "-" + "9" * 400, "1e999", ".inf", ".nan",
    "~", "null", "true", "yes", "on", "{}", "[]", "{a: 1}", "[1, [2, [3]]]", "'x'", '"\\ud800"',
    "&a x", "*a", "*undefined", "? complex", "|\n  block", ">-\n  folded", "9" * 400 + "d",
    "30m", "1h30m", "-5m", "0s", "1.5h", '"' + "x" * 300 + '"', "18446744073709551616",
    "-9223372036854775809", "340282366920938463463374607431768211455",
]  # fmt: skip
yaml_scalars = st.one_of(
    st.sampled_from(YAML_SCALARS),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
        max_size=20,
    ),
)


def mutate_lines(text: str, draw_index: Any, replacement: str) -> str:
    """``text`` with one line's value (after the first ': ') replaced."""
    lines = text.splitlines()
    i = draw_index % len(lines)
    head, sep, _ = lines[i].partition(": ")
    lines[i] = f"{head}{sep or ': '}{replacement}"
    return "\n".join(lines) + "\n"
