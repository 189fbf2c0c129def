"""Strict YAML loading with source positions, shared by specs and rule files.

Why not ``yaml.safe_load``: it forgets where values came from, silently keeps
the last of two duplicate keys, resolves ``on``/``yes``/``no`` as booleans
(YAML 1.1) and expands aliases without bound. Every one of those breaks a
contract checker that must name file:line:col and agree with the reference,
whose serde_yaml resolves scalars as YAML 1.2.

We let libyaml (C) parse, then build plain Python values ourselves from its
events (scalars read as :mod:`engine.yamlscalars` says). Mappings become
:class:`LocDict` and sequences :class:`LocList`: ordinary ``dict``/``list``
subclasses (so decide and JSON code treat them as plain data) that remember
where each key and item sits.

Speed matters because every ``skillspec validate`` (a pre-commit hook) pays
for it: no node graph is composed (a fifth of the parse), positions stay the
parser's marks until a checker asks for one, a field path is rendered only
for an error, and the garbage collector is paused while the (acyclic) values
are built, since its passes over the growing heap found nothing to free and
cost a fifth of the parse.
"""

from __future__ import annotations

import gc
from pathlib import Path

from engine.capped import CappedReadError, read_capped
from engine.errors import Diagnostic, InputError, InvalidSource, Location
from engine.libyaml import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MarkedYAMLError,
    Parser,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    YAMLError,
)
from engine.record import Record
from engine.yamlscalars import (
    STR_TAG,
    TAG_WORDS,
    TYPED_START,
    matches,
    plain_value,
    typed_value,
)

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final, Protocol

    class Mark(Protocol):
        """A parser position, 0-based (libyaml's marks and PyYAML's error marks)."""

        @property
        def line(self) -> int: ...
        @property
        def column(self) -> int: ...

    #: A libyaml parse event (``yaml.events``), read untyped: the stubs make optional what
    #: the C parser always sets (the marks) or sets by kind (anchor, tag, value, implicit).
    Event = Any

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


class LocDict(_DictBase):
    """A mapping that remembers its own position and each key's and value's.

    Each key's and value's is kept as the parser's mark (0-based, in the
    mapping's file) and made a :class:`Location` when asked for: a document
    has a position per node, and its checkers ask for few of them.
    """

    __slots__ = ("key_pos", "pos", "val_pos")

    def __init__(self, pos: Location) -> None:
        super().__init__()
        self.pos = pos
        self.key_pos: dict[str, Mark] = {}
        self.val_pos: dict[str, Mark] = {}

    def where(self, key: str) -> Location:
        """Position of ``key`` if present, else of the mapping itself."""
        mark = self.key_pos.get(key)
        return self.pos if mark is None else _loc(self.pos.file, mark)

    def where_value(self, key: str) -> Location:
        """Position of ``key``'s value if present, else :meth:`where` (only then looked up)."""
        mark = self.val_pos.get(key)
        return self.where(key) if mark is None else _loc(self.pos.file, mark)


class LocList(_ListBase):
    """A sequence that remembers its own position and each item's (as marks, as LocDict)."""

    __slots__ = ("item_pos", "pos")

    def __init__(self, pos: Location) -> None:
        super().__init__()
        self.pos = pos
        self.item_pos: list[Mark] = []

    def where(self, index: int) -> Location:
        if 0 <= index < len(self.item_pos):
            return _loc(self.pos.file, self.item_pos[index])
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


def _loc(file: str | None, mark: Mark) -> Location:
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
    """Builds a document's values straight from libyaml's parse events, strictly.

    No node graph is composed: each event becomes its value as it arrives,
    positions are the events' own marks, and a field path is rendered only
    for an error. What composing did is done here, with its words: an alias
    is its anchor's node again (the anchored node's events are recorded and
    replayed, counted and depth-checked again where the alias stands), an
    undefined alias, a second anchor of a name and a second document are
    errors. And composing came first: every parse error and those three
    outrank any error found while building, wherever they are in the file.
    So a build error is held (:meth:`drain`) until the rest of the document
    has parsed; errors are raised in document order, depth first, as the
    nodes are met, so the first problem in the file is the one reported.
    """

    def __init__(self, file: str, parser: Parser) -> None:
        self.file = file
        self.count = 0
        #: The deepest mapping or sequence built (the root one at 1).
        self.depth = 0
        #: The parser's events, one per call, and the same recorded (:meth:`recorded`):
        #: the two sources of events that are new (a replay's events are not).
        self.parse: Callable[[], Event] = parser.get_event
        self.record: Callable[[], Event] = self.recorded
        #: Each anchor's node's events, replayed where an alias names it.
        self.anchors: dict[str, list[Event]] = {}
        #: The recordings of the anchored nodes being parsed (the innermost last).
        self.recording: list[list[Event]] = []

    def fail(self, message: str, mark: Mark, path: str = "", hint: str = "") -> InvalidSource:
        diag = Diagnostic(message, _loc(self.file, mark), path=path, code="yaml", hint=hint)
        return InvalidSource(message, title="Invalid YAML", diagnostics=[diag])

    def document(self) -> Any:
        """The stream's one document's value (None for no document), as composing reads it."""
        parse = self.parse
        parse()  # the stream's start
        if type(parse()) is StreamEndEvent:  # (or the document's start)
            return None
        first = parse()
        try:
            data = self.node(first, parse, None, 0)
        except InvalidSource:
            self.drain(first)
            raise
        parse()  # the document's end
        self.single(first)
        return data

    def single(self, first: Event) -> None:
        """After the document's end: refuse a second document."""
        event = self.parse()
        if type(event) is not StreamEndEvent:
            raise MarkedYAMLError(
                "expected a single document in the stream",
                first.start_mark,
                "but found another document",
                event.start_mark,
            )

    def drain(self, first: Event) -> None:
        """After a build error: parse the rest as composing would, for errors that outrank it."""
        while True:
            event = self.parse()
            kind = type(event)
            if kind is DocumentEndEvent:
                break
            if kind is AliasEvent:
                self.anchored(event)
            elif (
                kind is not SequenceEndEvent
                and kind is not MappingEndEvent
                and event.anchor is not None
            ):
                self.anchor(event)
        self.single(first)

    def anchor(self, event: Event) -> list[Event]:
        """The recording of the node ``event`` starts and anchors; a name is anchored once."""
        name = event.anchor
        first = self.anchors.get(name)
        if first is not None:
            raise MarkedYAMLError(
                "found duplicate anchor; first occurrence",
                first[0].start_mark,
                "second occurrence",
                event.start_mark,
            )
        recording = self.anchors[name] = [event]
        return recording

    def anchored(self, alias: Event) -> list[Event]:
        """The recorded events of the node ``alias`` names."""
        events = self.anchors.get(alias.anchor)
        if events is None:
            raise MarkedYAMLError(None, None, "found undefined alias", alias.start_mark)
        return events

    def recorded(self) -> Event:
        """The parser's next event, recorded for each anchored node being parsed."""
        event = self.parse()
        for recording in self.recording:
            recording.append(event)
        return event

    def start(self, event: Event) -> Mark:
        """Where the node ``event`` starts begins: for an alias, where its anchor's node does."""
        if type(event) is AliasEvent and event.anchor in self.anchors:
            event = self.anchors[event.anchor][0]
        mark: Mark = event.start_mark
        return mark

    def node(self, event: Event, parse: Callable[[], Event], path: _Path, depth: int) -> Any:
        """The value of the node that starts with ``event``; ``parse`` gives its other events."""
        kind = type(event)
        recording = None
        if kind is AliasEvent:  # its anchor's node, replayed here from its recording
            replay = iter(self.anchored(event))
            event = next(replay)
            kind = type(event)
            parse = replay.__next__
        elif event.anchor is not None and (parse is self.parse or parse is self.record):
            recording = self.anchor(event)  # (an anchor met in a replay is not a new one)
            if kind is not ScalarEvent:
                self.recording.append(recording)
                parse = self.record
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(
                f"document expands to more than {MAX_NODES} nodes (alias bomb?)", event.start_mark
            )
        if depth > MAX_DEPTH:
            raise self.fail(
                f"nesting deeper than {MAX_DEPTH} levels", event.start_mark, _render(path)
            )
        if kind is ScalarEvent:
            return self.scalar(event, path)
        if depth >= self.depth:
            self.depth = depth + 1
        here = _loc(self.file, event.start_mark)
        value: LocList | LocDict
        if kind is SequenceStartEvent:
            value = self.sequence(LocList(here), parse, path, depth)
        else:
            value = self.mapping(LocDict(here), parse, path, depth)
        if recording is not None:
            self.recording.pop()
        return value

    def sequence(
        self, seq: LocList, parse: Callable[[], Event], path: _Path, depth: int
    ) -> LocList:
        item_pos = seq.item_pos
        inline = depth < MAX_DEPTH  # the items' depth, depth + 1, is within the limit
        while True:
            event = parse()
            kind = type(event)
            if (
                kind is ScalarEvent
                and event.tag is None
                and event.anchor is None
                and inline
                and self.count < MAX_NODES
            ):
                # Most nodes are untagged scalars: what node() returns for one while both
                # limits hold, without the call (the rest, and every error, go to node()).
                self.count += 1
                value = event.value
                if event.implicit[0] and value[:1] in TYPED_START:  # else: a string, as it is
                    value = plain_value(value)
                seq.append(value)
                item_pos.append(event.start_mark)
            elif kind is SequenceEndEvent:
                return seq
            else:
                item_pos.append(self.start(event))
                seq.append(self.node(event, parse, (path, len(seq)), depth + 1))

    def mapping(
        self, mapping: LocDict, parse: Callable[[], Event], path: _Path, depth: int
    ) -> LocDict:
        key_pos = mapping.key_pos
        val_pos = mapping.val_pos
        inline = depth < MAX_DEPTH
        while True:
            event = parse()
            kind = type(event)
            if kind is ScalarEvent and event.tag is None and event.anchor is None:
                key = event.value  # an untagged key is its text, whatever it would resolve to
                key_mark = event.start_mark
            elif kind is MappingEndEvent:
                return mapping
            else:
                event = self.key(event, parse, path)
                key = event.value
                key_mark = event.start_mark
            if key in mapping:
                raise self.fail(
                    f"duplicate key `{key}` (first defined at line {key_pos[key].line + 1})",
                    key_mark,
                    _join(_render(path), key),
                    DUPLICATE_KEY_HINT,
                )
            event = parse()
            kind = type(event)
            if (
                kind is ScalarEvent
                and event.tag is None
                and event.anchor is None
                and inline
                and self.count < MAX_NODES
            ):
                self.count += 1  # as in the sequence loop above
                value = event.value
                if event.implicit[0] and value[:1] in TYPED_START:  # as in sequence()
                    value = plain_value(value)
                mapping[key] = value
                val_pos[key] = event.start_mark
            else:
                val_pos[key] = self.start(event)
                mapping[key] = self.node(event, parse, (path, key), depth + 1)
            key_pos[key] = key_mark

    def key(self, event: Event, parse: Callable[[], Event], path: _Path) -> Event:
        """The scalar a mapping key is (an alias's is its anchor's node), its tag checked."""
        if type(event) is AliasEvent:
            event = self.anchored(event)[0]
        elif event.anchor is not None and (parse is self.parse or parse is self.record):
            self.anchor(event)
        if type(event) is not ScalarEvent:
            raise self.fail("mapping keys must be plain scalars", event.start_mark, _render(path))
        if event.tag is not None and event.tag != "!":
            self.scalar(event, path)  # for its errors: a key is its text
        return event

    def scalar(self, event: Event, path: _Path) -> Any:
        """The value of a scalar: resolved when plain and untagged, else as its tag says."""
        tag = event.tag
        value = event.value
        if tag is None or tag == "!":
            return plain_value(value) if event.implicit[0] else value
        if tag == STR_TAG:
            return value
        what = TAG_WORDS.get(tag)
        if what is not None:
            if not matches(value, tag):
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise self.fail(f"`{shown}` is not {what}", event.start_mark, _render(path))
            return typed_value(value, tag)
        if tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp"):
            return value
        raise self.fail(f"unsupported YAML tag {tag}", event.start_mark, _render(path))


DUPLICATE_KEY_HINT = (
    "a deliberate divergence from the reference checker, which silently keeps the last "
    "value: remove one of the two"
)


def _char_at(text: str, line: int, col: int) -> str:
    lines = text.splitlines()
    if 0 <= line < len(lines) and 0 <= col < len(lines[line]):
        return lines[line][col]
    return ""


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
    collecting = gc.isenabled()
    gc.disable()  # see the module docstring; re-enabled below whatever happens
    try:
        return _parse(text, file)
    finally:
        if collecting:
            gc.enable()


def _parse(text: str, file: str) -> YamlDocument:
    try:
        builder = _Builder(file, Parser(text))
        data = builder.document()
    except YAMLError as exc:
        raise invalid_yaml(exc, text, file) from None
    return YamlDocument(data=data, text=text, file=file, depth=builder.depth)


def invalid_yaml(exc: YAMLError, text: str, file: str) -> InvalidSource:
    """PyYAML's error as an :class:`InvalidSource` at its mark (a tab said as such)."""
    if not isinstance(exc, MarkedYAMLError):
        return InvalidSource(
            f"{file}: {exc}",
            title="Invalid YAML",
            diagnostics=[Diagnostic(str(exc), Location(file), code="yaml")],
        )
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "malformed YAML"
    if exc.context:
        problem = f"{problem} ({exc.context})"
    loc = _loc(file, mark) if mark is not None else Location(file)
    if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
        problem = "tab character: YAML indentation must use spaces"
    return InvalidSource(
        f"{loc}: {problem}",
        title="Invalid YAML",
        diagnostics=[Diagnostic(problem, loc, code="yaml")],
    )


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
