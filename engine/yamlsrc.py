"""Strict YAML loading with source positions, shared by specs and rule files.

Why not ``yaml.safe_load``: it forgets where values came from, silently keeps
the last of two duplicate keys, resolves ``on``/``yes``/``no`` as booleans
(YAML 1.1) and expands aliases without bound. Every one of those breaks a
contract checker that must name file:line:col and agree with the reference,
whose serde_yaml resolves scalars as YAML 1.2.

We let libyaml (C) build the node graph, then construct plain Python values
ourselves. Mappings become :class:`LocDict` and sequences :class:`LocList`:
ordinary ``dict``/``list`` subclasses (so decide and JSON code treat them as
plain data) that remember where each key and item sits.

Speed matters because every ``skillspec validate`` (a pre-commit hook) pays
for it: the resolver answers libyaml from one table lookup, the builder
renders a node's field path only when it reports an error at that node and
creates each position once, and the garbage collector is paused while the
(acyclic) values are built, since its passes over the growing heap found
nothing to free and cost a fifth of the parse.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path

from engine.capped import CappedReadError, read_capped
from engine.errors import Diagnostic, InputError, InvalidSource, Location
from engine.libyaml import (
    MappingNode,
    MarkedYAMLError,
    Node,
    Parser,
    ScalarNode,
    SequenceNode,
    YAMLError,
)
from engine.record import Record

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any, Final

    _DictBase = dict[str, Any]
    _ListBase = list[Any]
    #: A field path, built as a chain and rendered only when an error names it:
    #: None (the root) or (parent path, key or index).
    _Path = tuple[Any, str | int] | None
else:
    _DictBase, _ListBase = dict, list

#: The UTF-8 byte order mark, refused before parsing (see :func:`decode_source`).
BOM = b"\xef\xbb\xbf"
#: Largest file we agree to read. Specs and rule files are hand-written.
MAX_BYTES = 4 * 1024 * 1024
#: Upper bound on constructed nodes, counting every alias expansion. This is
#: what defeats "billion laughs": the graph is small, the expansion is not.
MAX_NODES = 250_000
#: Nesting we accept (libyaml itself stops at 1000).
MAX_DEPTH = 200


class _Yaml12Loader(Parser):
    """libyaml parser with YAML 1.2 core-schema implicit resolution.

    libyaml calls :meth:`resolve` once per node, so it is PyYAML's own
    ``BaseResolver.resolve`` without the parts this loader never uses (no
    wildcard resolvers, no path resolvers), and the path-resolver hooks do
    nothing.
    """

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            return implicit_tag(value) if implicit[0] else _STR_TAG
        return _SEQ_TAG if kind is SequenceNode else _MAP_TAG

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"

#: A plain scalar of a leading zero then more digits (``012``, ``-007``) is a
#: string in YAML 1.2 as serde_yaml resolves it: neither an octal nor a decimal
#: number, so neither the int nor the float resolver may take it.
_LEADING_ZERO = r"(?![-+]?0[0-9]+$)"
#: The core schema's pattern per tag. Compiled on first use (:func:`_pattern`): resolving
#: a plain scalar needs the int and float ones only for numbers other than plain decimal
#: digits (see :func:`implicit_tag`), and an explicit tag needs its own; compiling all four
#: at import cost ~3M instructions of every ``skillspec validate``.
_PATTERNS = {
    _INT_TAG: rf"^{_LEADING_ZERO}(?:[-+]?[0-9]+|[-+]?0o[0-7]+|[-+]?0x[0-9a-fA-F]+|[-+]?0b[01]+)$",
    _FLOAT_TAG: rf"^{_LEADING_ZERO}(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    _BOOL_TAG: r"^(?:true|True|TRUE|false|False|FALSE)$",
    _NULL_TAG: r"^(?:~|null|Null|NULL|)$",
}
#: What the bool and null patterns match among plain scalars, which never end in a line break.
_BOOLS = frozenset(("true", "True", "TRUE", "false", "False", "FALSE"))
_NULLS = frozenset(("~", "null", "Null", "NULL", ""))
#: The first characters of an int or float literal, every character either pattern can
#: match, and the float literals starting with ".".
_NUMBER_START = frozenset("-+.0123456789")
_NUMBER_CHARS = frozenset("-+.0123456789abcdefABCDEFoxinIN")
_DOT_FLOATS = frozenset((".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"))


def _pattern(tag: str) -> re.Pattern[str]:
    """The core schema's pattern for ``tag``, through ``re``'s cache of compiled patterns."""
    return re.compile(_PATTERNS[tag])


def implicit_tag(value: str) -> str:
    """The tag of the plain scalar ``value`` under YAML 1.2's core schema, as PyYAML resolves it.

    Its resolvers try int, float, bool then null, each where the first
    character allows, by the patterns of :data:`_PATTERNS`; this answers the
    same without a pattern for the common cases (words, plain decimal
    digits, ``true``/``null``, paths like ``.mcp.json``). A plain scalar never ends in a line break,
    so set membership is what ``^...$`` matches (tests/test_yaml_resolver.py).
    """
    first = value[:1]
    if first in _NUMBER_START:
        if value.isdigit() and value.isascii():
            return _STR_TAG if first == "0" and len(value) > 1 else _INT_TAG
        if first == "." and not "0" <= value[1:2] <= "9":
            return _FLOAT_TAG if value in _DOT_FLOATS else _STR_TAG
        if not _NUMBER_CHARS.issuperset(value):  # `254 skills`, `85%`
            return _STR_TAG
        for tag in (_INT_TAG, _FLOAT_TAG):
            if _pattern(tag).match(value):
                return tag
        return _STR_TAG
    if value in _BOOLS:
        return _BOOL_TAG
    return _NULL_TAG if value in _NULLS else _STR_TAG


#: The integer range serde_yaml tries (u64, i64, then u128 and i128). Beyond it
#: a decimal literal is read as a float when finite, and otherwise (and for a
#: hex, octal or binary literal) stays a string.
INT128_MIN, UINT128_MAX = -(2**127), 2**128 - 1
#: Free-form maps (``allow``, ``metadata``) hold serde values, whose integers are 64-bit.
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1
_MAX_INT_DIGITS = 40  # one more than UINT128_MAX has: int() of this is always safe
_INF = float("inf")


class LocDict(_DictBase):
    """A mapping that remembers its own position and each key's and value's."""

    __slots__ = ("key_pos", "pos", "val_pos")

    def __init__(self, pos: Location) -> None:
        super().__init__()
        self.pos = pos
        self.key_pos: dict[str, Location] = {}
        self.val_pos: dict[str, Location] = {}

    def where(self, key: str) -> Location:
        """Position of ``key`` if present, else of the mapping itself."""
        return self.key_pos.get(key, self.pos)

    def where_value(self, key: str) -> Location:
        """Position of ``key``'s value if present, else :meth:`where` (only then looked up)."""
        pos = self.val_pos.get(key)
        return pos if pos is not None else self.where(key)


class LocList(_ListBase):
    """A sequence that remembers its own position and each item's."""

    __slots__ = ("item_pos", "pos")

    def __init__(self, pos: Location) -> None:
        super().__init__()
        self.pos = pos
        self.item_pos: list[Location] = []

    def where(self, index: int) -> Location:
        if 0 <= index < len(self.item_pos):
            return self.item_pos[index]
        return self.pos


class YamlDocument(Record):
    """A parsed file: its root value, its text (for caret rendering), its name.

    ``depth`` is how deep mappings and sequences nest (the root one is 1; 0
    for a scalar document), known from the parse so checkers with their own
    limit need not walk the document again.
    """

    __slots__ = ("data", "depth", "file", "text")
    __match_args__ = ("data", "text", "file", "depth")

    def __init__(self, data: Any, text: str, file: str, depth: int = 0) -> None:
        self.data: Final = data
        self.text: Final = text
        self.file: Final = file
        self.depth: Final = depth


def _loc(file: str, mark: Any) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


def _render(path: _Path) -> str:
    """``rules[0].prefer`` for the chain (None, "rules") -> 0 -> "prefer"."""
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    text = ""
    for part in reversed(parts):
        text = f"{text}[{part}]" if isinstance(part, int) else _join(text, part)
    return text


class _Builder:
    """Turns a libyaml node graph into LocDict/LocList/scalars, strictly."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.count = 0
        #: The deepest mapping or sequence built (the root one at 1).
        self.depth = 0

    def fail(self, message: str, mark: Any, path: str = "", hint: str = "") -> InvalidSource:
        diag = Diagnostic(message, _loc(self.file, mark), path=path, code="yaml", hint=hint)
        return InvalidSource(message, title="Invalid YAML", diagnostics=[diag])

    def build(
        self, node: Node, path: _Path = None, depth: int = 0, loc: Location | None = None
    ) -> Any:
        """``node``'s value; ``loc`` is its start position when the caller already made it.

        Errors are raised in document order, depth first, exactly as the
        nodes are met, so the first problem in the file is the one reported.
        """
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(
                f"document expands to more than {MAX_NODES} nodes (alias bomb?)", node.start_mark
            )
        if depth > MAX_DEPTH:
            raise self.fail(
                f"nesting deeper than {MAX_DEPTH} levels", node.start_mark, _render(path)
            )
        kind = type(node)
        if kind is _ScalarNode:
            if node.tag == _STR_TAG:
                return node.value
            return self.scalar(node, _render(path))  # type: ignore[arg-type]
        file = self.file
        mark = node.start_mark
        here = loc or Location(file, mark.line + 1, mark.column + 1)
        if kind is _SequenceNode:
            if depth >= self.depth:
                self.depth = depth + 1
            seq = LocList(here)
            shallow = depth < MAX_DEPTH  # the items' depth, depth + 1, is within the limit
            item_pos = seq.item_pos
            for i, item in enumerate(node.value):
                mark = item.start_mark
                at = Location(file, mark.line + 1, mark.column + 1)
                if (
                    type(item) is _ScalarNode
                    and item.tag == _STR_TAG
                    and shallow
                    and self.count < MAX_NODES
                ):
                    # Most nodes are string scalars: what build() returns for one while both
                    # limits hold, without the call (the rest, and every error, go to build).
                    self.count += 1
                    seq.append(item.value)
                else:
                    seq.append(self.build(item, (path, i), depth + 1, at))
                item_pos.append(at)
            return seq
        if kind is _MappingNode:
            if depth >= self.depth:
                self.depth = depth + 1
            mapping = LocDict(here)
            shallow = depth < MAX_DEPTH
            key_pos = mapping.key_pos
            val_pos = mapping.val_pos
            for key_node, value_node in node.value:
                if type(key_node) is not _ScalarNode:
                    raise self.fail(
                        "mapping keys must be plain scalars", key_node.start_mark, _render(path)
                    )
                if key_node.tag == _STR_TAG:
                    key = key_node.value
                else:
                    key = self.scalar(key_node, _render(path))
                    if not isinstance(key, str):
                        key = _scalar_text(key_node)
                if key in mapping:
                    first = key_pos[key]
                    raise self.fail(
                        f"duplicate key `{key}` (first defined at line {first.line})",
                        key_node.start_mark,
                        _join(_render(path), key),
                        DUPLICATE_KEY_HINT,
                    )
                mark = value_node.start_mark
                at = Location(file, mark.line + 1, mark.column + 1)
                if (
                    type(value_node) is _ScalarNode
                    and value_node.tag == _STR_TAG
                    and shallow
                    and self.count < MAX_NODES
                ):
                    self.count += 1  # as in the sequence loop above
                    mapping[key] = value_node.value
                else:
                    mapping[key] = self.build(value_node, (path, key), depth + 1, at)
                mark = key_node.start_mark
                key_pos[key] = Location(file, mark.line + 1, mark.column + 1)
                val_pos[key] = at
            return mapping
        raise self.fail("unsupported YAML node", node.start_mark, _render(path))  # pragma: no cover

    def scalar(self, node: ScalarNode, path: str) -> Any:
        tag = node.tag
        value = node.value
        if tag == "tag:yaml.org,2002:str":
            return value
        what = _TAG_WORDS.get(tag)
        if what is not None and implicit_tag(value) != tag and not _pattern(tag).match(value):
            # only an explicit tag (`!!int abc`) gets here; what resolves to ``tag`` matches it
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise self.fail(f"`{shown}` is not {what}", node.start_mark, path)
        if tag == "tag:yaml.org,2002:bool":
            return value.lower() == "true"
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag == "tag:yaml.org,2002:int":
            return _int_scalar(value)
        if tag == "tag:yaml.org,2002:float":
            low = value.lower()
            if low.endswith(".inf"):
                return float("-inf") if low.startswith("-") else float("inf")
            if low == ".nan":
                return float("nan")
            number = float(value)
            return number if -_INF < number < _INF else value  # `1e999`: a string, as serde
        if tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp"):
            return value
        raise self.fail(f"unsupported YAML tag {tag}", node.start_mark, path)


DUPLICATE_KEY_HINT = (
    "a deliberate divergence from the reference checker, which silently keeps the last "
    "value: remove one of the two"
)
#: What a value of each core-schema tag must be, for the error when it is not.
_TAG_WORDS = {
    _INT_TAG: "an integer",
    _FLOAT_TAG: "a float",
    _BOOL_TAG: "a boolean (true or false)",
    _NULL_TAG: "null",
}
_RADIX = {"0x": 16, "0o": 8, "0b": 2}
_ScalarNode, _SequenceNode, _MappingNode = ScalarNode, SequenceNode, MappingNode


def _int_scalar(value: str) -> int | float | str:
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


def _char_at(text: str, line: int, col: int) -> str:
    lines = text.splitlines()
    if 0 <= line < len(lines) and 0 <= col < len(lines[line]):
        return lines[line][col]
    return ""


def _scalar_text(node: ScalarNode) -> str:
    return str(node.value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _too_large(file: str, size: int | None) -> InputError:
    size_text = f"{size} bytes" if size is not None else f"more than {MAX_BYTES} bytes"
    return InputError(
        f"{file}: file is {size_text}; the limit is {MAX_BYTES}",
        title="File too large",
        diagnostics=[
            Diagnostic(f"file is larger than {MAX_BYTES} bytes", Location(file), code="size")
        ],
    )


def decode_source(raw: bytes, file: str) -> str:
    """Bytes to text, refusing binary, non-UTF-8 and BOM-prefixed input with a location.

    Over the size cap is unreadable (:class:`InputError`, exit 2); the rest was
    read and is invalid (:class:`InvalidSource`, exit 1). A byte order mark is
    refused because the reference checker refuses it, and a spec that passes
    here must pass there.
    """
    if len(raw) > MAX_BYTES:
        raise _too_large(file, len(raw))
    if b"\x00" in raw[:8192]:
        raise InvalidSource(
            f"{file}: binary file (NUL byte)",
            title="Binary file",
            diagnostics=[Diagnostic("binary file (contains NUL bytes)", Location(file, 1, 1))],
        )
    if raw.startswith(BOM):
        raise _bom_error(file)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        raise InvalidSource(
            f"{file}:{line}:{col}: {msg}",
            title="Bad encoding",
            diagnostics=[Diagnostic(msg, Location(file, line, col), code="encoding")],
        ) from None


def _bom_error(file: str) -> InvalidSource:
    msg = "the file starts with a UTF-8 byte order mark, which the reference checker rejects"
    hint = "save the file as UTF-8 without a BOM"
    return InvalidSource(
        f"{file}:1:1: {msg}",
        title="Byte order mark",
        diagnostics=[Diagnostic(msg, Location(file, 1, 1), code="encoding", hint=hint)],
    )


def parse_yaml(text: str, file: str = "<input>") -> YamlDocument:
    """Parse one YAML document strictly; raise :class:`InvalidSource` with a location."""
    if text.startswith("\ufeff"):
        raise _bom_error(file)
    builder = _Builder(file)
    collecting = gc.isenabled()
    gc.disable()  # see the module docstring; re-enabled below whatever happens
    try:
        return _parse(text, file, builder)
    finally:
        if collecting:
            gc.enable()


def _parse(text: str, file: str, builder: _Builder) -> YamlDocument:
    try:
        loader = _Yaml12Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "malformed YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        loc = _loc(file, mark) if mark is not None else Location(file)
        if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
            problem = "tab character: YAML indentation must use spaces"
        raise InvalidSource(
            f"{loc}: {problem}",
            title="Invalid YAML",
            diagnostics=[Diagnostic(problem, loc, code="yaml")],
        ) from None
    except YAMLError as exc:
        raise InvalidSource(
            f"{file}: {exc}",
            title="Invalid YAML",
            diagnostics=[Diagnostic(str(exc), Location(file), code="yaml")],
        ) from None
    data = None if node is None else builder.build(node)
    return YamlDocument(data=data, text=text, file=file, depth=builder.depth)


def load_yaml_file(path: str | Path, display: str | None = None) -> YamlDocument:
    """Read and parse ``path``; every failure is an :class:`InputError`."""
    name = display or str(path)
    try:
        raw = read_capped(path, MAX_BYTES)
    except CappedReadError as exc:
        if exc.kind == "too_large":
            raise _too_large(name, exc.size) from None
        reason = exc.reason
        raise InputError(
            f"{name}: cannot read: {reason}",
            title="Unreadable file",
            diagnostics=[Diagnostic(f"cannot read: {reason}", Location(name), code="io")],
        ) from None
    return parse_yaml(decode_source(raw, name), name)
