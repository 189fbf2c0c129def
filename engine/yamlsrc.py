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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.capped import CappedReadError, read_capped
from engine.errors import Diagnostic, InputError, Location

try:  # libyaml is in every PyYAML wheel we install; fall back for odd builds.
    _BaseLoader: type[Any] = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _BaseLoader = yaml.SafeLoader

#: Largest file we agree to read. Specs and rule files are hand-written.
MAX_BYTES = 4 * 1024 * 1024
#: Upper bound on constructed nodes, counting every alias expansion. This is
#: what defeats "billion laughs": the graph is small, the expansion is not.
MAX_NODES = 250_000
#: Nesting we accept (libyaml itself stops at 1000).
MAX_DEPTH = 200


class _Yaml12Loader(_BaseLoader):  # type: ignore[misc]
    """libyaml parser with YAML 1.2 core-schema implicit resolution."""


_Yaml12Loader.yaml_implicit_resolvers = {}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


class LocDict(dict[str, Any]):
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
        return self.val_pos.get(key, self.where(key))


class LocList(list[Any]):
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


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """A parsed file: its root value, its text (for caret rendering), its name."""

    data: Any
    text: str
    file: str


def _loc(file: str, mark: Any) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


class _Builder:
    """Turns a libyaml node graph into LocDict/LocList/scalars, strictly."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.count = 0

    def fail(self, message: str, mark: Any, path: str = "") -> InputError:
        diag = Diagnostic(message, _loc(self.file, mark), path=path, code="yaml")
        return InputError(message, title="Invalid YAML", diagnostics=[diag])

    def build(self, node: yaml.Node, path: str, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(
                f"document expands to more than {MAX_NODES} nodes (alias bomb?)", node.start_mark
            )
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels", node.start_mark, path)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, yaml.SequenceNode):
            seq = LocList(_loc(self.file, node.start_mark))
            for i, item in enumerate(node.value):
                seq.append(self.build(item, f"{path}[{i}]", depth + 1))
                seq.item_pos.append(_loc(self.file, item.start_mark))
            return seq
        if isinstance(node, yaml.MappingNode):
            mapping = LocDict(_loc(self.file, node.start_mark))
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.fail("mapping keys must be plain scalars", key_node.start_mark, path)
                key = self.scalar(key_node, path)
                if not isinstance(key, str):
                    key = _scalar_text(key_node)
                if key in mapping:
                    first = mapping.key_pos[key]
                    raise self.fail(
                        f"duplicate key `{key}` (first defined at line {first.line})",
                        key_node.start_mark,
                        _join(path, key),
                    )
                child = _join(path, key)
                mapping[key] = self.build(value_node, child, depth + 1)
                mapping.key_pos[key] = _loc(self.file, key_node.start_mark)
                mapping.val_pos[key] = _loc(self.file, value_node.start_mark)
            return mapping
        raise self.fail("unsupported YAML node", node.start_mark, path)  # pragma: no cover

    def scalar(self, node: yaml.ScalarNode, path: str) -> Any:
        tag = node.tag
        value = node.value
        if tag == "tag:yaml.org,2002:str":
            return value
        if tag == "tag:yaml.org,2002:bool":
            return value.lower() == "true"
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag == "tag:yaml.org,2002:int":
            if value.startswith("0o"):
                return int(value[2:], 8)
            if value.startswith("0x"):
                return int(value[2:], 16)
            return int(value)
        if tag == "tag:yaml.org,2002:float":
            low = value.lower()
            if low.endswith(".inf"):
                return float("-inf") if low.startswith("-") else float("inf")
            if low == ".nan":
                return float("nan")
            return float(value)
        if tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp"):
            return value
        raise self.fail(f"unsupported YAML tag {tag}", node.start_mark, path)


def _char_at(text: str, line: int, col: int) -> str:
    lines = text.splitlines()
    if 0 <= line < len(lines) and 0 <= col < len(lines[line]):
        return lines[line][col]
    return ""


def _scalar_text(node: yaml.ScalarNode) -> str:
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
    """Bytes to text, refusing binary and non-UTF-8 input with a location."""
    if len(raw) > MAX_BYTES:
        raise _too_large(file, len(raw))
    if b"\x00" in raw[:8192]:
        raise InputError(
            f"{file}: binary file (NUL byte)",
            title="Binary file",
            diagnostics=[Diagnostic("binary file (contains NUL bytes)", Location(file, 1, 1))],
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        raise InputError(
            f"{file}:{line}:{col}: {msg}",
            title="Bad encoding",
            diagnostics=[Diagnostic(msg, Location(file, line, col), code="encoding")],
        ) from None


def parse_yaml(text: str, file: str = "<input>") -> YamlDocument:
    """Parse one YAML document strictly; raise :class:`InputError` with a location."""
    builder = _Builder(file)
    try:
        loader = _Yaml12Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "malformed YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        loc = _loc(file, mark) if mark is not None else Location(file)
        if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
            problem = "tab character: YAML indentation must use spaces"
        raise InputError(
            f"{loc}: {problem}",
            title="Invalid YAML",
            diagnostics=[Diagnostic(problem, loc, code="yaml")],
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(
            f"{file}: {exc}",
            title="Invalid YAML",
            diagnostics=[Diagnostic(str(exc), Location(file), code="yaml")],
        ) from None
    data = None if node is None else builder.build(node, "", 0)
    return YamlDocument(data=data, text=text, file=file)


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
