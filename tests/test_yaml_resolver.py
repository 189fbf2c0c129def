"""The plain-scalar resolver answers as the core schema's patterns do, mostly without them.

:func:`engine.yamlscalars.implicit_tag` resolves the commonest scalars (words,
decimal digits, booleans, nulls, ``.``-paths) by set lookups and string
methods, and compiles the int and float patterns only for what else looks
like a number. These tests hold it to the table it replaced: PyYAML's
implicit resolvers in order (int, float, bool, null), each tried when the
first character allows, each matching with its pattern.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.yamlscalars import PATTERNS, implicit_tag
from engine.yamlsrc import parse_yaml

STR, INT, FLOAT, BOOL, NULL = (
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null")
)
#: (tag, first characters) in the resolvers' order, as PyYAML's add_implicit_resolver lists them.
RESOLVERS = (
    (INT, "-+0123456789"),
    (FLOAT, "-+.0123456789"),
    (BOOL, "tTfF"),
    (NULL, "~nN"),
)


def by_the_table(value: str) -> str:
    """The tag the pattern table gives ``value`` ("" is a candidate for null only)."""
    first = value[:1]
    for tag, firsts in RESOLVERS:
        if (first in firsts if first else tag == NULL) and re.match(PATTERNS[tag], value):
            return tag
    return STR


#: Characters numbers, booleans and nulls are made of, and some that are not.
ALPHABET = "0123456789+-._eExXoObBaAcCdDfFiInNlLuUtTrRsS~ %/:\n"
WORDS = st.sampled_from(
    [
        *("0", "00", "012", "-0", "+7", "0x1F", "0o17", "0b101", "0x", "1e5", "1E+5", "1.", ".5"),
        *(".inf", "-.inf", "+.INF", ".Inf", ".nan", ".NaN", ".nAn", "-.nan", "1_000", "0.1.2"),
        *("true", "True", "TRUE", "tRue", "false", "no", "null", "Null", "NULL", "nULL", "~", ""),
        *("254 skills", "85%", ".mcp.json", ".skillspec/x", "12:30", "1e999", "٣", "¹"),
    ]
)
VALUES = st.one_of(WORDS, st.text(ALPHABET, max_size=8), st.text(max_size=6))


@settings(max_examples=3000, deadline=None)
@given(VALUES)
@example("1\n2")
def test_plain_scalars_resolve_as_the_pattern_table_does(value: str) -> None:
    if value.endswith("\n"):  # a plain scalar's value never ends in a line break
        value = value.rstrip("\n")
    assert implicit_tag(value) == by_the_table(value), value


@settings(max_examples=2000, deadline=None)
@given(VALUES, st.sampled_from([INT, FLOAT, BOOL, NULL]))
@example("true\n", BOOL)
@example(".inf\n", FLOAT)
def test_what_resolves_to_a_tag_matches_that_tags_pattern(value: str, tag: str) -> None:
    # the explicit-tag check (`!!bool true`) trusts the resolver before compiling a pattern
    if implicit_tag(value) == tag:
        assert re.match(PATTERNS[tag], value)


def test_explicit_tags_still_check_with_the_patterns() -> None:
    # (``$`` also matches before a final line break, so `!!bool "true\n"` passes the check
    # and reads false, as it always did)
    doc = parse_yaml('a: !!bool "true\\n"\nb: !!float "1"\nc: !!int 12\nd: !!null ""\n')
    assert doc.data == {"a": False, "b": 1.0, "c": 12, "d": None}
