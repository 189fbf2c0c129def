"""YAML 1.2 core-schema scalars as the reference's serde_yaml reads them.

The one home of what a scalar's text means: which tag a plain scalar
resolves to (:func:`implicit_tag`), the pattern a tagged one must match
(:data:`PATTERNS`) and the value each core tag gives (:func:`typed_value`),
integers within 128 bits included. :mod:`engine.yamlsrc` builds documents
with it; the structure checker reads the 64-bit range of free-form values.

Every ``skillspec validate`` resolves thousands of scalars, so the common
ones (words, decimal digits, ``true``, ``null``, paths such as ``.mcp.json``)
are answered by set lookups and string methods, and a pattern is compiled
only for what else looks like a number or carries an explicit tag: compiling
the four at import cost ~3M instructions of every run.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

STR_TAG = "tag:yaml.org,2002:str"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
BOOL_TAG = "tag:yaml.org,2002:bool"
NULL_TAG = "tag:yaml.org,2002:null"

#: A plain scalar of a leading zero then more digits (``012``, ``-007``) is a
#: string in YAML 1.2 as serde_yaml resolves it: neither an octal nor a decimal
#: number, so neither the int nor the float resolver may take it.
_LEADING_ZERO = r"(?![-+]?0[0-9]+$)"
#: The core schema's pattern per tag, compiled on first use (:func:`pattern`).
PATTERNS = {
    INT_TAG: rf"^{_LEADING_ZERO}(?:[-+]?[0-9]+|[-+]?0o[0-7]+|[-+]?0x[0-9a-fA-F]+|[-+]?0b[01]+)$",
    FLOAT_TAG: rf"^{_LEADING_ZERO}(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    BOOL_TAG: r"^(?:true|True|TRUE|false|False|FALSE)$",
    NULL_TAG: r"^(?:~|null|Null|NULL|)$",
}
#: What a value of each core tag but str must be, for the error when it is not.
TAG_WORDS = {
    INT_TAG: "an integer",
    FLOAT_TAG: "a float",
    BOOL_TAG: "a boolean (true or false)",
    NULL_TAG: "null",
}
#: What the bool and null patterns match among plain scalars, which never end in a line break.
_BOOLS = frozenset(("true", "True", "TRUE", "false", "False", "FALSE"))
_NULLS = frozenset(("~", "null", "Null", "NULL", ""))
#: The first characters of an int or float literal, every character either pattern can
#: match, and the float literals starting with ".".
_NUMBER_START = frozenset("-+.0123456789")
_NUMBER_CHARS = frozenset("-+.0123456789abcdefABCDEFoxinIN")
_DOT_FLOATS = frozenset((".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"))
#: The first characters of a plain scalar that may resolve to something other than a string.
TYPED_START = _NUMBER_START | frozenset(("t", "T", "f", "F", "~", "n", "N", ""))

#: The integer range serde_yaml tries (u64, i64, then u128 and i128). Beyond it
#: a decimal literal is read as a float when finite, and otherwise (and for a
#: hex, octal or binary literal) stays a string.
INT128_MIN, UINT128_MAX = -(2**127), 2**128 - 1
#: Free-form maps (``allow``, ``metadata``) hold serde values, whose integers are 64-bit.
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1
_MAX_INT_DIGITS = 40  # one more than UINT128_MAX has: int() of this is always safe
_RADIX = {"0x": 16, "0o": 8, "0b": 2}
_INF = float("inf")


def pattern(tag: str) -> re.Pattern[str]:
    """The core schema's pattern for ``tag``, through ``re``'s cache of compiled patterns."""
    return re.compile(PATTERNS[tag])


def implicit_tag(value: str) -> str:
    """The tag of the plain scalar ``value`` under YAML 1.2's core schema, as PyYAML resolves it.

    Its resolvers try int, float, bool then null, each where the first
    character allows, by :data:`PATTERNS`; this answers the same without a
    pattern for the common cases. A plain scalar never ends in a line break,
    so set membership is what ``^...$`` matches (tests/test_yaml_resolver.py).
    """
    first = value[:1]
    if first in _NUMBER_START:
        if value.isdigit() and value.isascii():
            return STR_TAG if first == "0" and len(value) > 1 else INT_TAG
        if first == "." and not "0" <= value[1:2] <= "9":
            return FLOAT_TAG if value in _DOT_FLOATS else STR_TAG
        if not _NUMBER_CHARS.issuperset(value):  # `254 skills`, `85%`
            return STR_TAG
        for tag in (INT_TAG, FLOAT_TAG):
            if pattern(tag).match(value):
                return tag
        return STR_TAG
    if value in _BOOLS:
        return BOOL_TAG
    return NULL_TAG if value in _NULLS else STR_TAG


def plain_value(value: str) -> Any:
    """The value of the plain untagged scalar ``value``: what it resolves to."""
    if value[:1] not in TYPED_START:
        return value  # most plain scalars: a word
    tag = implicit_tag(value)
    return value if tag == STR_TAG else typed_value(value, tag)


def matches(value: str, tag: str) -> bool:
    """Whether ``value`` matches core ``tag``'s pattern (what resolves to ``tag`` does)."""
    return implicit_tag(value) == tag or pattern(tag).match(value) is not None


def typed_value(value: str, tag: str) -> Any:
    """``value`` as the core ``tag`` (not str) reads it; it :func:`matches` the tag."""
    if tag == BOOL_TAG:
        return value.lower() == "true"
    if tag == NULL_TAG:
        return None
    if tag == INT_TAG:
        return int_scalar(value)
    low = value.lower()
    if low.endswith(".inf"):
        return float("-inf") if low.startswith("-") else float("inf")
    if low == ".nan":
        return float("nan")
    number = float(value)
    return number if -_INF < number < _INF else value  # `1e999`: a string, as serde


def int_scalar(value: str) -> int | float | str:
    """An integer literal the way serde_yaml reads it (never a ValueError).

    Within 128 bits it is an int; a longer decimal literal is a float when
    finite and otherwise, like an over-long hex, octal or binary literal, the
    string itself.
    """
    sign = -1 if value.startswith("-") else 1
    digits = value.lstrip("+-")
    radix = _RADIX.get(digits[:2], 10)
    if radix != 10:
        number = sign * int(digits[2:], radix)  # power-of-two bases have no digit limit
    elif len(digits) <= _MAX_INT_DIGITS:
        number = int(value)
    else:
        number = UINT128_MAX + 1
    if INT128_MIN <= number <= UINT128_MAX:
        return number
    if radix == 10:
        as_float = float(value)
        if -_INF < as_float < _INF:  # finite (NaN compares false)
            return as_float
    return value
