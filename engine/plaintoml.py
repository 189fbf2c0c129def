"""Read the plain TOML a ``harness.toml`` is written in without importing tomllib.

Why: ``harness hook claude-code`` runs once per agent tool call and reads the
config each time; importing tomllib (its parser module and the regular
expressions it compiles) cost about a third of the hook's own start-up.

:func:`loads` accepts only a small, unambiguous subset: comments, blank
lines, ``[a.b]`` headers of bare keys, and ``key = value`` lines whose value
is a string without escapes (basic or literal), a decimal integer, ``true``,
``false`` or a one-line array of such strings. For text in that subset it
returns exactly what ``tomllib.loads`` returns; for anything else (another
value type, a quoted or dotted key, a multi-line array, a repeated key or
table, a control character, a CRLF) it returns None and the caller asks
tomllib, which also reports every syntax error. Property tests hold it to
tomllib on generated documents, inside the subset and just outside it.
"""

from __future__ import annotations

from typing import Any

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")
#: Control characters TOML refuses in comments and strings (tab is allowed), and CR.
_REFUSED = frozenset(chr(c) for c in (*range(0x09), *range(0x0A + 1, 0x20), 0x7F))
#: Longest integer accepted here; longer ones go to tomllib (TOML integers are 64-bit).
_MAX_DIGITS = 18


class _Outside(Exception):
    """The text leaves the subset: the caller must use tomllib."""


def loads(text: str) -> dict[str, Any] | None:
    """``tomllib.loads(text)`` for a plain document, None for anything else."""
    if not _REFUSED.isdisjoint(text):
        return None
    try:
        return _Reader().read(text)
    except _Outside:
        return None


class _Reader:
    def __init__(self) -> None:
        self.root: dict[str, Any] = {}
        self.headers: list[tuple[str, ...]] = []

    def read(self, text: str) -> dict[str, Any]:
        table = self.root
        for line in text.split("\n"):
            rest = line.lstrip(" \t")
            if not rest or rest[0] == "#":
                continue
            if rest[0] == "[":
                table = self.header(rest)
            else:
                self.key_value(rest, table)
        return self.root

    def header(self, line: str) -> dict[str, Any]:
        end = line.find("]")
        if end < 0:
            raise _Outside
        _end_of_line(line[end + 1 :])
        path = tuple(line[1:end].split("."))
        if not all(_bare(part) for part in path):
            raise _Outside  # also `[[array]]`, quoted keys, spaces inside the brackets
        # A table defined twice, or a super-table defined after one of its
        # sub-tables (valid TOML, but rare): tomllib decides.
        if any(seen[: len(path)] == path for seen in self.headers):
            raise _Outside
        self.headers.append(path)
        table = self.root
        for part in path:
            child = table.setdefault(part, {})
            if not isinstance(child, dict):
                raise _Outside
            table = child
        return table

    def key_value(self, line: str, table: dict[str, Any]) -> None:
        eq = line.find("=")
        key = line[:eq].rstrip(" \t")
        if eq < 0 or not _bare(key) or key in table:
            raise _Outside
        value, rest = _value(line[eq + 1 :].lstrip(" \t"))
        _end_of_line(rest)
        table[key] = value


def _bare(key: str) -> bool:
    return bool(key) and _BARE.issuperset(key)


def _end_of_line(rest: str) -> None:
    """Only blanks and a comment may follow a value or a header."""
    rest = rest.lstrip(" \t")
    if rest and rest[0] != "#":
        raise _Outside


def _value(text: str) -> tuple[Any, str]:
    """(value, what follows it) for the value at the start of ``text``."""
    first = text[:1]
    if first in ('"', "'"):
        return _string(text)
    if first == "[":
        return _array(text[1:])
    for word, value in (("true", True), ("false", False)):
        if text.startswith(word):
            return value, text[len(word) :]
    digits = text[1:] if first == "-" else text
    n = 0
    while n < len(digits) and digits[n] in _DIGITS:
        n += 1
    if n == 0 or n > _MAX_DIGITS or (n > 1 and digits[0] == "0"):
        raise _Outside
    rest = digits[n:]
    if rest[:1] in ("_", ".", "e", "E", ":", "-", "x", "o", "b") or rest[:1] in _DIGITS:
        raise _Outside
    return int(text[: len(text) - len(rest)]), rest


def _string(text: str) -> tuple[str, str]:
    quote = text[0]
    if text.startswith(quote * 3):
        raise _Outside  # a multi-line string
    end = text.find(quote, 1)
    if end < 0:
        raise _Outside
    inner = text[1:end]
    if quote == '"' and "\\" in inner:
        raise _Outside  # an escape: tomllib decodes it
    return inner, text[end + 1 :]


def _array(text: str) -> tuple[list[str], str]:
    """The strings of a one-line array whose ``[`` was just read; a trailing comma is fine."""
    items: list[str] = []
    while True:
        text = text.lstrip(" \t")
        if text[:1] == "]":
            return items, text[1:]
        if text[:1] not in ('"', "'"):
            raise _Outside
        item, text = _string(text)
        items.append(item)
        text = text.lstrip(" \t")
        if text[:1] == ",":
            text = text[1:]
        elif text[:1] != "]":
            raise _Outside
