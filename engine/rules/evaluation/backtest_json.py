"""The text of ``harness rules backtest --json``: what ``json.dumps(indent=2)`` writes, faster.

Why: a backtest of 30 rules over a 45-day journal has 27k fires, 21 MB of
JSON, and the standard library writes indented JSON with its pure-Python
encoder (the C one only runs without ``indent``): a second, as long as the
replay itself. This writes the same characters: fires through a template
that knows their shape (strings encoded by the C string encoder ``json``
itself uses), everything else through an encoder that follows ``json``'s own
rules for indentation, separators, key conversion and ``default=str``. A test
holds the two byte-identical on real backtests and on odd values.

Lone surrogates are escaped afterwards, as :func:`engine.jsontext.dumps` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from json.encoder import encode_basestring
from typing import Any

from engine.durations import format_duration_ms
from engine.jsontext import escape_surrogates
from engine.timefmt import iso_ms

_enc_str: Callable[[str], str] = encode_basestring
_INDENT = "  "


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


def _key(key: object) -> str:
    """A mapping key as ``json`` writes it (it converts scalars and refuses the rest)."""
    if isinstance(key, str):
        return _enc_str(key)
    if isinstance(key, float):
        return _enc_str(_float(key))
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return _enc_str(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def encode(value: Any, level: int = 0) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False, default=str)`` nested at ``level``."""
    if isinstance(value, str):
        return _enc_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = "\n" + _INDENT * (level + 1)
        items = ("," + inner).join(encode(v, level + 1) for v in value)
        return "[" + inner + items + "\n" + _INDENT * level + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = "\n" + _INDENT * (level + 1)
        items = ("," + inner).join(f"{_key(k)}: {encode(v, level + 1)}" for k, v in value.items())
        return "{" + inner + items + "\n" + _INDENT * level + "}"
    return encode(str(value), level)


class _Fires:
    """Encodes fires at a fixed depth, remembering parts that repeat (names, reasons, calls)."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.pad = "\n" + _INDENT * (level + 1)
        self.item = ("," + self.pad + _INDENT).join
        self.memo: dict[str, str] = {}
        self.lists: dict[tuple[Any, ...], str] = {}

    def text(self, value: object) -> str:
        if type(value) is not str:
            return encode(value, self.level + 1)
        found = self.memo.get(value)
        if found is None:
            found = self.memo[value] = _enc_str(value)
        return found

    def reasons(self, reasons: tuple[Any, ...]) -> str:
        found = self.lists.get(reasons)
        if found is None:
            if not reasons:
                found = "[]"
            else:
                inner = self.item(self.text(r) for r in reasons)
                found = f"[{self.pad}{_INDENT}{inner}{self.pad}]"
            self.lists[reasons] = found
        return found

    def calls(self, calls: tuple[Any, ...]) -> str:
        key = ("calls", *calls)
        found = self.lists.get(key)
        if found is None:
            if not calls:
                found = "[]"
            else:
                inner = self.item(encode(_call_json(c), self.level + 2) for c in calls)
                found = f"[{self.pad}{_INDENT}{inner}{self.pad}]"
            self.lists[key] = found
        return found

    def fire(self, f: Any) -> str:
        pad, s = self.pad, self.text
        if type(f.seq) is not int or type(f.at) is not int:
            return encode(fire_json(f), self.level)
        try:
            key = (f.rule, f.hash, f.level, f.effective_level, f.status, f.reasons, f.calls)
            tail = self.lists.get(key)
        except TypeError:  # something unhashable: no memo, the plain way
            return encode(fire_json(f), self.level)
        if tail is None:
            # Everything after the target is the same for every fire of a rule that
            # shares its level, status, reasons and calls: encode it once.
            tail = self.lists[key] = (
                f'"level": {s(f.level)},{pad}"effective_level": {s(f.effective_level)},{pad}'
                f'"status": {s(f.status)},{pad}"reasons": {self.reasons(tuple(f.reasons))},'
                f'{pad}"aggregates": {self.calls(tuple(f.calls))}\n{_INDENT * self.level}}}'
            )
        head = self.lists.get((f.rule, f.hash))
        if head is None:
            head = self.lists[(f.rule, f.hash)] = f'"rule": {s(f.rule)},{pad}"hash": {s(f.hash)},'
        target_json = s(f.target)
        return (
            f'{{{pad}"seq": {f.seq},{pad}"at": {f.at},{pad}"time": "{iso_ms(f.at)}",{pad}'
            f'{head}{pad}"target": {target_json},{pad}{tail}'
        )


def _call_json(c: Any) -> dict[str, Any]:
    return {
        "fn": c.fn,
        "field": c.field,
        "selector": dict(c.selector),
        "window": format_duration_ms(c.window_ms),
        "result": c.result,
    }


def fire_json(f: Any) -> dict[str, Any]:
    """One fire as the backtest's JSON shows it."""
    return {
        "seq": f.seq,
        "at": f.at,
        "time": iso_ms(f.at),
        "rule": f.rule,
        "hash": f.hash,
        "target": f.target,
        "level": f.level,
        "effective_level": f.effective_level,
        "status": f.status,
        "reasons": list(f.reasons),
        "aggregates": [_call_json(c) for c in f.calls],
    }


def json_bytes(document: dict[str, Any], fires: Any, key: str = "fires") -> bytes:
    """:func:`json_text` encoded as UTF-8 (the pieces of :func:`write_json`, joined)."""
    out: list[bytes] = []
    write_json(document, fires, out.append, key)
    return b"".join(out)


def write_json(
    document: dict[str, Any], fires: Any, write: Callable[[bytes], object], key: str = "fires"
) -> None:
    """:func:`json_bytes`, handed to ``write`` a piece at a time.

    A 27k-fire report is 21 MB; built whole, its text, its bytes and the copy
    with the final newline were ~100 MB of the command's peak memory at once.
    Escaping a lone surrogate is a per-character change, so escaping each
    piece gives the same bytes as escaping the whole.
    """
    for piece in _pieces(document, fires, key):
        try:  # a surrogate-free piece is encoded once, unsearched
            data = piece.encode("utf-8")
        except UnicodeEncodeError:
            data = escape_surrogates(piece).encode("utf-8")
        write(data)


def json_text(document: dict[str, Any], fires: Any, key: str = "fires") -> str:
    """``document`` as indented JSON, its ``key`` entry written from the ``fires`` objects.

    ``document[key]`` must be what ``[fire_json(f) for f in fires]`` gives
    (it is left out of the work: only its position in the key order counts).
    """
    return escape_surrogates("".join(_pieces(document, fires, key)))


#: Fires per piece of :func:`_pieces` (about 400 KB of text).
_FIRES_PER_PIECE = 512


def _pieces(document: dict[str, Any], fires: Any, key: str) -> Iterator[str]:
    """:func:`json_text` in pieces, surrogates unescaped: each entry, fires by the hundred."""
    if not document:
        yield "{}"
        return
    inner = "\n" + _INDENT
    opening = "{" + inner
    for k, v in document.items():
        yield f"{opening}{_key(k)}: "
        opening = "," + inner
        if k != key:
            yield encode(v, 1)
        elif not fires:
            yield "[]"
        else:
            enc = _Fires(2)
            sep = "," + inner + _INDENT
            listed = list(fires)
            yield "[" + inner + _INDENT
            for i in range(0, len(listed), _FIRES_PER_PIECE):
                part = sep.join(enc.fire(f) for f in listed[i : i + _FIRES_PER_PIECE])
                yield part if i == 0 else sep + part
            yield inner + "]"
    yield "\n}"
