"""JSON text in and out without Python-specific crashes: one reader, one writer.

Why not plain ``json.loads``/``json.dumps``: on hostile input the standard
library fails in ways that are not a ``JSONDecodeError`` and so escape every
``except`` written for bad JSON. ``[[[[…]]]]`` nested ten thousand deep raises
``RecursionError``; an integer literal of 4,301+ digits raises ``ValueError``
(CPython's int/str conversion limit); and a lone surrogate (``"\\ud800"``) is
valid JSON that decodes to a ``str`` no UTF-8 stream can write, so echoing it
back raises ``UnicodeEncodeError``. Journal rows, ``decide --inputs`` lines and
every ``--json`` output go through here, so each of those becomes an ordinary
:class:`JsonTextError` (reading) or a valid ``\\uXXXX`` escape (writing).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Deepest nesting accepted. Journal rows are flat and decide inputs are one
#: string; this only has to stop a stack-exhausting document early.
MAX_DEPTH = 64
#: Longest integer literal accepted (digits). Every integer field we read is
#: bounded far below this (journal ``at`` has 15 digits).
MAX_INT_DIGITS = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonTextError(ValueError):
    """Text that is not acceptable JSON; ``col`` is 1-based (0 when unknown)."""

    def __init__(self, message: str, col: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.col = col


class _IntTooLong(Exception):
    def __init__(self, digits: int) -> None:
        self.digits = digits


def _parse_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise _IntTooLong(len(text))
    return int(text)


def loads(text: str) -> Any:
    """Parse ``text`` as one JSON value; every refusal is a :class:`JsonTextError`."""
    try:
        value = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise JsonTextError(f"not JSON: {exc.msg}", exc.colno) from None
    except _IntTooLong as exc:
        raise JsonTextError(
            f"integer literal of {exc.digits} digits (at most {MAX_INT_DIGITS})"
        ) from None
    except RecursionError:
        raise JsonTextError(f"nested deeper than {MAX_DEPTH} levels") from None
    if nested_deeper_than(value, MAX_DEPTH):
        raise JsonTextError(f"nested deeper than {MAX_DEPTH} levels")
    return value


def nested_deeper_than(value: object, limit: int) -> bool:
    """True when ``value`` nests containers more than ``limit`` deep (iterative: no recursion).

    A scalar is depth 0 and ``[]`` depth 1. For a value parsed by ``json.loads``
    elsewhere (which accepts nesting up to the interpreter's recursion limit),
    so that what reads it next, recursive or not, never meets a value too deep.
    """
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as a JSON ``\\uXXXX`` escape.

    Inside JSON output a surrogate can only sit in a string, where the escape
    means the same code point, so the result is valid JSON and encodable as
    UTF-8; elsewhere it is still a readable, unambiguous spelling.
    """
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)``, always writable as UTF-8."""
    kwargs.setdefault("ensure_ascii", False)
    return escape_surrogates(json.dumps(obj, **kwargs))
