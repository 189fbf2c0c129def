"""Building values from parse events gives what composing a node graph gave, errors included.

``engine.yamlsrc`` used to let libyaml compose the whole node graph and then
build values from it; it now builds them straight from the parse events,
recording anchored nodes to replay at their aliases. :class:`ComposedBuild`
below is the composing builder as it was (the oracle), and random documents
(anchors, aliases, cycles, tags, duplicate keys and anchors, complex keys,
second documents, syntax errors, limits made small) must give both the same
values, positions and depth, or the same first error, byte for byte.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from yaml.error import YAMLError
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

import engine.yamlsrc as yamlsrc
from engine.errors import Diagnostic, InvalidSource, Location
from engine.libyaml import Parser
from engine.yamlscalars import PATTERNS, int_scalar
from engine.yamlsrc import DUPLICATE_KEY_HINT, LocDict, LocList, invalid_yaml, parse_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator

    from yaml.nodes import Node

STR = "tag:yaml.org,2002:str"
#: The core schema's implicit resolvers, in order: (tag, first characters, pattern name).
RESOLVERS = [
    ("tag:yaml.org,2002:int", "-+0123456789"),
    ("tag:yaml.org,2002:float", "-+.0123456789"),
    ("tag:yaml.org,2002:bool", "tTfF"),
    ("tag:yaml.org,2002:null", "~nN"),
]


class _ComposingLoader(Parser):
    """libyaml composing the node graph, resolving plain scalars by the pattern table."""

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                first = value[:1]
                for tag, firsts in RESOLVERS:
                    if (first in firsts if first else tag.endswith("null")) and re.match(
                        PATTERNS[tag], value
                    ):
                        return tag
            return STR
        return "seq" if kind is SequenceNode else "map"

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


class ComposedBuild:
    """The builder over a composed node graph, as engine.yamlsrc had it (the oracle)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.count = 0
        self.depth = 0

    def loc(self, node: Node) -> Location:
        return Location(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def fail(self, message: str, node: Node, path: str = "", hint: str = "") -> InvalidSource:
        diag = Diagnostic(message, self.loc(node), path=path, code="yaml", hint=hint)
        return InvalidSource(message, title="Invalid YAML", diagnostics=[diag])

    def build(self, node: Node, path: str = "", depth: int = 0) -> Any:
        self.count += 1
        if self.count > yamlsrc.MAX_NODES:
            raise self.fail(
                f"document expands to more than {yamlsrc.MAX_NODES} nodes (alias bomb?)", node
            )
        if depth > yamlsrc.MAX_DEPTH:
            raise self.fail(f"nesting deeper than {yamlsrc.MAX_DEPTH} levels", node, path)
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if depth >= self.depth:
            self.depth = depth + 1
        if isinstance(node, SequenceNode):
            seq = LocList(self.loc(node))
            for i, item in enumerate(node.value):
                seq.append(self.build(item, f"{path}[{i}]", depth + 1))
                seq.item_pos.append(item.start_mark)
            return seq
        assert isinstance(node, MappingNode)
        mapping = LocDict(self.loc(node))
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self.fail("mapping keys must be plain scalars", key_node, path)
            if key_node.tag != STR:
                self.scalar(key_node, path)
            key = key_node.value
            if key in mapping:
                first = mapping.where(key).line
                raise self.fail(
                    f"duplicate key `{key}` (first defined at line {first})",
                    key_node,
                    f"{path}.{key}" if path else key,
                    DUPLICATE_KEY_HINT,
                )
            mapping[key] = self.build(value_node, f"{path}.{key}" if path else key, depth + 1)
            mapping.key_pos[key] = key_node.start_mark
            mapping.val_pos[key] = value_node.start_mark
        return mapping

    def scalar(self, node: ScalarNode, path: str) -> Any:
        tag, value = node.tag, node.value
        if tag == STR:
            return value
        words = {
            "int": "an integer",
            "float": "a float",
            "bool": "a boolean (true or false)",
            "null": "null",
        }
        name = tag.rsplit(":", 1)[-1]
        if tag.startswith("tag:yaml.org,2002:") and name in words:
            if not re.match(PATTERNS[tag], value):
                shown = value if len(value) <= 40 else value[:37] + "..."
                raise self.fail(f"`{shown}` is not {words[name]}", node, path)
            if name == "bool":
                return value.lower() == "true"
            if name == "null":
                return None
            if name == "int":
                return int_scalar(value)
            low = value.lower()
            if low.endswith(".inf"):
                return -math.inf if low.startswith("-") else math.inf
            if low == ".nan":
                return math.nan
            number = float(value)
            return number if math.isfinite(number) else value
        if tag in ("tag:yaml.org,2002:binary", "tag:yaml.org,2002:timestamp"):
            return value
        raise self.fail(f"unsupported YAML tag {tag}", node, path)


def composed(text: str, file: str) -> tuple[Any, int]:
    """(value, depth) as composing then building read ``text``; InvalidSource as parse_yaml's."""
    try:
        node = _ComposingLoader(text).get_single_node()
    except YAMLError as exc:
        raise invalid_yaml(exc, text, file) from None
    build = ComposedBuild(file)
    return (None if node is None else build.build(node)), build.depth


def outcome(read: Any, text: str) -> tuple[str, Any]:
    """What reading ``text`` gave: ("ok", value and every position) or ("error", its words)."""
    try:
        data, depth = read(text)
    except InvalidSource as exc:
        return "error", (
            str(exc),
            [(d.message, d.location, d.path, d.hint) for d in exc.diagnostics],
        )
    return "ok", (shape(data), depth)


def shape(value: Any) -> Any:
    """``value`` with its types, positions and NaNs spelled out, for comparing two readings."""
    if isinstance(value, LocDict):
        items = [(k, value.where(k), value.where_value(k), shape(v)) for k, v in value.items()]
        return ("map", value.pos, items)
    if isinstance(value, LocList):
        return ("seq", value.pos, [(value.where(i), shape(v)) for i, v in enumerate(value)])
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return (type(value).__name__, value)


def events_read(text: str) -> tuple[Any, int]:
    doc = parse_yaml(text, "d.yml")
    return doc.data, doc.depth


@contextmanager
def limits(nodes: int, depth: int) -> Iterator[None]:
    """Both builders' limits lowered, so random documents reach them."""
    saved = yamlsrc.MAX_NODES, yamlsrc.MAX_DEPTH
    yamlsrc.MAX_NODES, yamlsrc.MAX_DEPTH = nodes, depth
    try:
        yield
    finally:
        yamlsrc.MAX_NODES, yamlsrc.MAX_DEPTH = saved


# -- random documents ----------------------------------------------------------------------

GOOD_SCALARS = [
    *("x", "word", "on", "yes", "true", "False", "null", "~", "12", "012", "-7", "0x1F"),
    *("1.5", ".5", ".inf", "-.INF", ".nan", "1e999", "1" + "0" * 45, '"q"', "'s'", '""'),
    *("!!int 3", "!!str 12", "!!float 1", "!!null ''", "! 12", "!!binary aGk=", "!!str"),
]
BAD_SCALARS = ["!!int abc", "!!bool maybe", "!custom x", "!!timestamp 2001-12-14", "!!seq x"]
KEYS = ["k", "m", "n", "p", "1", "true", "~", '"q"', "!!int 5", "!!str 7", "&"]


class Anchors:
    """What a document being drawn has so far: its anchors (in document order), its keys.

    A clean document never repeats an anchor or a key, nor names an undefined anchor,
    nor has a badly tagged scalar, so most read without error (aliases, cycles aside).
    """

    def __init__(self, clean: bool) -> None:
        self.clean = clean
        self.names: list[str] = []
        self.keys = 0

    def anchor(self, draw: st.DrawFn) -> str:
        """A new name mostly; now and then one already used (a duplicate anchor)."""
        if self.names and not self.clean and draw(st.integers(0, 9)) == 0:
            return draw(st.sampled_from(self.names))
        self.names.append(f"a{len(self.names)}")
        return self.names[-1]

    def alias(self, draw: st.DrawFn) -> str:
        """A defined name mostly (an ancestor's makes a cycle), now and then an undefined one;
        a plain ``x`` while no anchor is defined yet."""
        if not self.clean and draw(st.integers(0, 19)) == 0:
            return "*undefined"
        return "*" + draw(st.sampled_from(self.names)) if self.names else "x"

    def scalar(self, draw: st.DrawFn) -> str:
        pool = GOOD_SCALARS if self.clean else GOOD_SCALARS + BAD_SCALARS
        return draw(st.sampled_from(pool))

    def key(self, draw: st.DrawFn) -> str:
        if self.clean:  # a fresh key, in one of the spellings
            self.keys += 1
            return draw(st.sampled_from([f"k{self.keys}", f'"q{self.keys}"', f"!!str {self.keys}"]))
        key = draw(st.sampled_from(KEYS))
        return "!!int z" if key == "&" else key


@st.composite
def nodes(draw: st.DrawFn, anchors: Anchors, depth: int = 0) -> str:
    """One flow-style node: a scalar, alias, sequence or mapping, maybe anchored or tagged."""
    kinds = ["scalar", "scalar", "alias", "seq", "map"] if depth < 4 else ["scalar", "alias"]
    kind = draw(st.sampled_from(kinds))
    if kind == "alias":
        return anchors.alias(draw)
    prefix = f"&{anchors.anchor(draw)} " if draw(st.integers(0, 3)) == 0 else ""
    if kind == "scalar":
        return prefix + anchors.scalar(draw)
    if kind == "seq":
        items = draw(st.lists(nodes(anchors, depth + 1), max_size=3))
        return prefix + "[" + ", ".join(items) + "]"
    pairs = []
    for _ in range(draw(st.integers(0, 3))):
        key = draw(keys(anchors, depth + 1))
        pairs.append(f"{key} : {draw(nodes(anchors, depth + 1))}")
    return prefix + "{" + ", ".join(pairs) + "}"


@st.composite
def keys(draw: st.DrawFn, anchors: Anchors, depth: int) -> str:
    choice = draw(st.integers(0, 11))
    if choice == 0:
        return anchors.alias(draw)
    if choice == 1 and not anchors.clean:
        return draw(nodes(anchors, depth))  # sometimes a collection: not a plain scalar
    if choice == 2:
        return f"&{anchors.anchor(draw)} {anchors.key(draw)}"
    return anchors.key(draw)


@st.composite
def documents(draw: st.DrawFn) -> str:
    anchors = Anchors(clean=draw(st.booleans()))
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        key = draw(keys(anchors, 1))
        lines.append(f"{key} : {draw(nodes(anchors, 1))}")
    text = "\n".join(lines) + "\n"
    if not anchors.clean and draw(st.integers(0, 9)) == 0:
        text += "---\nz: 1\n"
    if not anchors.clean and draw(st.integers(0, 3)) == 0:  # an edit, often a syntax error
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(list("[]{}:,&*!-?'\"\t\n# "))) + text[at:]
    return text


@settings(max_examples=1000, deadline=None)
@given(documents(), st.sampled_from([(250_000, 200), (12, 3), (30, 2), (6, 9)]))
@example("a: &a [x, *a]\n", (250_000, 200))
@example("a: &a {k: *a}\nb: *a\n", (250_000, 200))
@example("a: [*b]\nb: &b 1\n", (250_000, 200))
@example("a: &a 1\nb: &a 2\n", (250_000, 200))
@example("? [x]\n: 1\nb: *u\n", (250_000, 200))
@example("a: !!int z\n---\nb: 1\n", (250_000, 200))
@example("a: !!int z\nb: [\n", (250_000, 200))
@example("&a [1, 2]: x\n", (250_000, 200))
@example("a: &r [1]\n*r : x\n", (250_000, 200))
@example("a: &k k\n*k : 1\nk: 2\n", (250_000, 200))
@example("", (250_000, 200))
@example("--- x\n", (250_000, 200))
@example("a: 1\nb: x\nc: y\nd: z\ne: w\nf: v\n", (6, 9))
@example("a: [1, x, y, z, w, v]\n", (6, 9))
@example("a: {b: {c: x}}\n", (250_000, 2))
@example("a: [b, [x]]\n", (250_000, 2))
def test_events_build_what_the_composed_graph_built(text: str, limit: tuple[int, int]) -> None:
    with limits(*limit):
        expected = outcome(lambda t: composed(t, "d.yml"), text)
        assert outcome(events_read, text) == expected, text


def test_the_alias_bomb_and_deep_nesting_read_the_same() -> None:
    bomb = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        bomb.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    for text in ("\n".join(bomb) + "\n", "[" * 250 + "]" * 250, "a: &a [b, *a]\n"):
        expected = outcome(lambda t: composed(t, "d.yml"), text)
        assert expected[0] == "error"
        assert outcome(events_read, text) == expected


def _parse_beneath(frames: int, text: str) -> tuple[str, Any]:
    """``text`` read ``frames`` calls deep: what a caller's own stack leaves the parser."""
    if frames:
        return _parse_beneath(frames - 1, text)
    return outcome(events_read, text)


def test_nesting_at_the_limit_parses_with_room_to_spare_on_the_stack() -> None:
    # two frames a level (a node, its sequence or mapping), an alias's replay none more
    chain = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 199)]
    for text in ("[" * 200 + "]" * 200, "\n".join(chain) + "\n"):
        read = _parse_beneath(400, text)
        assert read[0] == "ok" and read == outcome(lambda t: composed(t, "d.yml"), text)
