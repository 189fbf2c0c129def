"""Leak-free primitive calls: the execution program a compiled rule really runs.

Why: cel-expr-python 0.1.3 never frees the arguments it converts for a Python
function (measured: a map argument ~300 B, a string ~110 B, even an int ~50 B
per call), while a function taking *no* arguments leaks nothing, and neither
does a small program whose result is read back with ``plain_value()``. A
busy ``harness evaluate --follow`` would otherwise grow without bound.

So the user's ``when`` is type-checked and validated exactly as written (its
errors point into its text; its AST feeds the semantic hash), and only then
rewritten at the protobuf level: every primitive call site ``i`` becomes the
zero-argument call ``__prim_int_i()`` / ``__prim_bool_i()``, keeping its node
id and thus its checked type. The Python side of that call rebuilds the
arguments itself, only when CEL reaches the call (so ``&&``/``||`` still
short-circuit): literals are folded at load time, a selector value
``event.<string field>`` is read straight from the row (an absent column is
``""``, as the proto3 optional field reads), and any other value expression
runs as its own little program, cut out of the same checked AST so it needs
no re-checking and keeps its types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from engine.rules.language.celast import AstDecodeError, CheckedAst, Node, read_varint, walk
from engine.rules.language.model import KINDS, MAX_PRIMITIVE_CALLS, PRIMITIVES

#: How a site obtains one value: a literal, a row column, or a cut-out program (node id).
ValueSource = tuple[str, object]


@dataclass(frozen=True, slots=True)
class SitePlan:
    """One primitive call site, replaced by ``name()`` in the execution program."""

    index: int
    node_id: int
    fn: str
    name: str
    field: ValueSource | None
    selector: tuple[tuple[str, ValueSource], ...]
    window: ValueSource


def zero_arg_name(fn: str, index: int) -> str:
    """The declared zero-argument function standing in for call site ``index``."""
    return f"__prim_{'bool' if fn == 'exists' else 'int'}_{index}"


def plan_sites(ast: CheckedAst, kind: str) -> tuple[SitePlan, ...] | None:
    """The call sites in source order, or None when a site has a shape we cannot split.

    The loader's checks already refuse those shapes (non-literal selector keys,
    primitives inside comprehensions, more than eight sites); None lets the
    caller fall back to evaluating the user's program as it is.
    """
    refs = ast.references
    string_fields = {f for f, t in KINDS.get(kind, ()) if t == "string"}
    found = [
        (node, depth)
        for node, depth in walk(ast.root)
        if node.kind == "call" and node.target is None and node.name in PRIMITIVES
    ]
    if len(found) > MAX_PRIMITIVE_CALLS or any(depth > 0 for _, depth in found):
        return None
    found.sort(key=lambda nd: ast.positions.get(nd[0].id, 0))

    def source(n: Node) -> ValueSource:
        if n.kind == "const" and n.ctype == "string":
            return ("lit", n.value)
        if n.kind == "select" and not n.test_only and n.args and n.name in string_fields:
            operand = n.args[0]
            if operand.kind == "ident" and (refs.get(operand.id) or operand.name) == "event":
                return ("row", n.name)
        return ("prog", n.id)

    sites: list[SitePlan] = []
    for i, (node, _) in enumerate(found):
        args = node.args
        field: ValueSource | None = None
        if node.name == "distinct":
            if len(args) != 3:
                return None
            field, args = source(args[0]), args[1:]
        if len(args) != 2 or args[0].kind != "map":
            return None
        selector = []
        for k, v in args[0].entries:
            if k.kind != "const" or k.ctype != "string":
                return None
            selector.append((str(k.value), source(v)))
        win = args[1]
        literal = (
            win.kind == "call"
            and win.name == "duration"
            and len(win.args) == 1
            and win.args[0].kind == "const"
        )
        window: ValueSource = ("const", win.id) if literal else ("prog", win.id)
        name = zero_arg_name(node.name, i)
        sites.append(SitePlan(i, node.id, node.name, name, field, tuple(selector), window))
    return tuple(sites)


def program_roots(sites: Iterable[SitePlan]) -> list[int]:
    """Node ids that need a cut-out program (computed values and windows)."""
    out = []
    for s in sites:
        for src in (s.field, *(v for _, v in s.selector), s.window):
            if src is not None and src[0] in ("prog", "const"):
                out.append(int(str(src[1])))
    return out


# --- rewriting the serialized CheckedExpr ---------------------------------------------

#: Which length-delimited fields hold (messages holding) Exprs, per message type.
_SUBMSG: dict[str, dict[int, str]] = {
    "expr": {5: "select", 6: "call", 7: "list", 8: "struct", 9: "comp"},
    "select": {1: "expr"},
    "call": {1: "expr", 3: "expr"},
    "list": {1: "expr"},
    "struct": {2: "entry"},
    "entry": {3: "expr", 4: "expr"},
    "comp": {2: "expr", 4: "expr", 5: "expr", 6: "expr", 7: "expr"},
}


def _enc_varint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _ld(num: int, payload: bytes) -> bytes:
    return _enc_varint(num << 3 | 2) + _enc_varint(len(payload)) + payload


def _spans(buf: bytes) -> list[tuple[int, int, bytes, bytes | int]]:
    """Each field as (number, wire type, its raw bytes, its payload or varint value)."""
    out: list[tuple[int, int, bytes, bytes | int]] = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        wire = key & 7
        value: bytes | int = b""
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise AstDecodeError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise AstDecodeError("truncated field")
        out.append((key >> 3, wire, buf[start:pos], value))
    return out


def _first_int(buf: bytes, num: int) -> int:
    for n, wire, _, value in _spans(buf):
        if n == num and wire == 0 and isinstance(value, int):
            return value
    return 0


def rewrite_checked(
    serialized: bytes, calls: Mapping[int, str], roots: Iterable[int] = ()
) -> tuple[bytes, dict[int, bytes]]:
    """Replace call nodes by zero-argument calls, and cut out sub-expressions.

    ``calls`` maps a node id to a function name: that node becomes ``name()``
    resolved to the overload of the same id, keeping its node id and hence
    its checked type. Returns the rewritten expression and, for each id in
    ``roots``, an expression of that node's (rewritten) subtree with the same
    reference and type maps, so ``Env.deserialize`` runs it unchanged. Both
    are serialized like ``Expression.serialize()``.
    """
    wanted = set(roots)
    cut: dict[int, bytes] = {}

    def msg(buf: bytes, kind: str, depth: int) -> bytes:
        if depth > 500:
            raise AstDecodeError("expression nested too deeply")
        sub = _SUBMSG[kind]
        parts = []
        for num, wire, raw, value in _spans(buf):
            if wire == 2 and num in sub and isinstance(value, bytes):
                child = sub[num]
                inner = expr(value, depth + 1) if child == "expr" else msg(value, child, depth + 1)
                parts.append(_ld(num, inner))
            else:
                parts.append(raw)
        return b"".join(parts)

    def expr(buf: bytes, depth: int) -> bytes:
        nid = _first_int(buf, 2)
        out = msg(buf, "expr", depth)
        if nid in wanted:
            cut[nid] = out
        if nid in calls:
            return _enc_varint(2 << 3) + _enc_varint(nid) + _ld(6, _ld(2, calls[nid].encode()))
        return out

    try:
        outer = _spans(serialized)
        url = b"".join(raw for num, _, raw, _ in outer if num == 1)
        payload = next((v for num, w, _, v in outer if num == 2 and isinstance(v, bytes)), None)
        if payload is None or not url:
            raise AstDecodeError("not a serialized expression")
        head: list[bytes] = []
        tail: list[bytes] = []
        body = b""
        for num, _wire, raw, value in _spans(payload):
            if num == 4 and isinstance(value, bytes):
                body = expr(value, 0)
            elif num == 2 and isinstance(value, bytes) and _first_int(value, 1) in calls:
                nid = _first_int(value, 1)
                ref = _ld(1, calls[nid].encode()) + _ld(3, calls[nid].encode())
                head.append(_ld(2, _enc_varint(1 << 3) + _enc_varint(nid) + _ld(2, ref)))
            else:
                (head if num < 4 else tail).append(raw)
    except (UnicodeDecodeError, IndexError) as exc:
        raise AstDecodeError(str(exc)) from None

    def wrap(root: bytes) -> bytes:
        return url + _ld(2, b"".join(head) + _ld(4, root) + b"".join(tail))

    return wrap(body), {nid: wrap(b) for nid, b in cut.items()}
