"""Hostile-input strategies shared by the fuzz modules: JSON values, text, YAML scalars.

The values are chosen from what found the crashes of issue 13: containers
where strings belong, integers past every limit, lone surrogates, deep
nesting, explicit YAML tags, leading zeros, byte order marks and NULs; and
from issue 22's two: paths the OS refuses (:data:`refused_paths`) in every
field that names a file, and one field nested at every depth up to the
interpreter's recursion limit (:data:`depths`, :func:`nested_json`). Random
deep values hit the failing window (a value that parses just under the limit
but is re-encoded from a deeper frame) only rarely: it is one or two depths
wide, so depth is drawn as an integer, or swept, never left to chance.
"""

from __future__ import annotations

import errno
import json
import os
import sys
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


#: The interpreter's recursion limit: ``json.loads`` accepts nesting just under
#: it, so values that deep reach whatever re-reads them (issue 22).
RECURSION_LIMIT = sys.getrecursionlimit()
#: The deepest nesting worth trying: a little past the recursion limit.
DEEPEST = RECURSION_LIMIT + 16
#: One nesting depth, every one from 1 to past the recursion limit equally likely.
depths = st.integers(min_value=1, max_value=DEEPEST)
NESTING_KINDS = ("list", "object")
nesting_kinds = st.sampled_from(NESTING_KINDS)


def nested_json(depth: int, kind: str = "list", leaf: str = "1") -> str:
    """JSON text of ``leaf`` inside ``depth`` lists or single-key objects."""
    if kind == "list":
        return "[" * depth + leaf + "]" * depth
    return '{"k":' * depth + leaf + "}" * depth


def nested_yaml(depth: int, kind: str = "list") -> str:
    """A YAML flow value nesting ``depth`` sequences or mappings around ``1``."""
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return "{k: " * depth + "1" + "}" * depth


def depth_band(width: int = 300) -> range:
    """The depths just under and past the recursion limit, each once (a deterministic sweep).

    A value nested just under the limit parses; whether code that re-reads it
    from a few frames deeper copes depends on how many frames deeper, so the
    failing depth moves with the call stack: every depth of the band is tried.
    """
    return range(max(1, RECURSION_LIMIT - width), DEEPEST + 1)


def json_parse_limit() -> int:
    """The deepest list nesting ``json.loads`` accepts when called from the caller's frame.

    What a command parses a few frames below the caller fails a little lower,
    and the one depth that parses but cannot be re-read lies just under that:
    a sweep of the band under this limit finds it wherever the stack puts it.
    """
    low, high = 1, DEEPEST
    while low < high:
        mid = (low + high + 1) // 2
        try:
            json.loads(nested_json(mid))
        except RecursionError:
            high = mid - 1
        else:
            low = mid
    return low


#: The longest file name and path the OS takes (bytes); longer ones are ENAMETOOLONG.
NAME_MAX = os.pathconf("/", "PC_NAME_MAX")
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
_PATH_BASES = st.sampled_from(["SKILL.md", "guide.md", "deps.toml", "a/b.md", "dir/", "x", ""])
#: Lone surrogates the file system encoding refuses (``\udc80``-``\udcff`` are
#: surrogateescape's, which encode to a byte: those are valid paths).
_UNENCODABLE = st.one_of(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDC7F),
    st.characters(min_codepoint=0xDD00, max_codepoint=0xDFFF),
)


def _insert(base: str, at: int, text: str) -> str:
    at %= len(base) + 1
    return base[:at] + text + base[at:]


#: Relative paths the OS refuses, without lone surrogates (YAML and TOML cannot
#: spell one): a NUL byte anywhere, a file name over NAME_MAX, a path over PATH_MAX.
refused_paths_no_surrogates = st.one_of(
    st.builds(_insert, _PATH_BASES, st.integers(0, 20), st.sampled_from(["\x00", "\x00\x00"])),
    # The long name comes first: a missing directory before it would be ENOENT.
    st.builds(
        lambda base, n: "n" * n + base, _PATH_BASES, st.integers(NAME_MAX + 1, NAME_MAX + 300)
    ),
    st.integers(PATH_MAX // 2, PATH_MAX // 2 + 200).map(lambda n: "d/" * n + "f.md"),
)
#: Every path the OS refuses, lone surrogates included (JSON text and argv can carry one).
refused_paths = st.one_of(
    refused_paths_no_surrogates,
    st.builds(
        lambda base, c, at: _insert(base, at, c), _PATH_BASES, _UNENCODABLE, st.integers(0, 20)
    ),
)


def os_refuses(path: str) -> bool:
    """Whether ``os.stat`` refuses ``path`` itself (not merely finds nothing there)."""
    try:
        os.stat(path)
    except ValueError:  # a NUL byte, or a character the file system cannot encode
        return True
    except OSError as exc:
        return exc.errno == errno.ENAMETOOLONG
    return False


def yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar (JSON's escapes are YAML's: ``\\u0000``)."""
    return json.dumps(text)
