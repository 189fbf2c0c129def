"""Decode the checked CEL AST and print its canonical form.

cel-expr-python hands back a compiled expression only as bytes
(``Expression.serialize()``): a ``google.protobuf.Any`` wrapping a
``cel.expr.CheckedExpr``. No PyPI package ships the cel-spec protos, so this
module reads the protobuf wire format directly and keeps only what the
validators and the semantic hash need: the expression tree, node positions,
and the checker's resolved references. Decoding is defensive: malformed bytes
raise :class:`AstDecodeError`, never an IndexError deep inside.

The canonical form is an S-expression over the tree without ids or positions,
with ``&&``/``||`` chains flattened, so whitespace, comments, parentheses and
the parser's balancing of long chains do not change the semantic hash, while
any change of operator, operand, literal or field does.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Literal

from engine.durations import DurationError, parse_duration_ms

NodeKind = Literal["const", "ident", "select", "call", "list", "struct", "map", "comp"]


class AstDecodeError(ValueError):
    """The serialized expression is not the CheckedExpr shape we understand."""


# --- protobuf wire format -------------------------------------------------------------

_Fields = dict[int, list[int | bytes]]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """One base-128 varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise AstDecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> _Fields:
    """Split one message into {field number: [raw values]} (varints as int, rest bytes)."""
    out: _Fields = {}
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise AstDecodeError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise AstDecodeError("truncated field")
        out.setdefault(num, []).append(value)
    return out


def _one_bytes(f: _Fields, num: int) -> bytes | None:
    vals = f.get(num)
    if not vals:
        return None
    v = vals[-1]
    if not isinstance(v, bytes):
        raise AstDecodeError(f"field {num}: expected length-delimited")
    return v


def _one_int(f: _Fields, num: int, default: int = 0) -> int:
    vals = f.get(num)
    if not vals:
        return default
    v = vals[-1]
    if not isinstance(v, int):
        raise AstDecodeError(f"field {num}: expected varint")
    return v


def _str(f: _Fields, num: int) -> str:
    b = _one_bytes(f, num)
    return b.decode("utf-8") if b is not None else ""


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# --- the tree -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    """One expression node. Which attributes matter depends on ``kind``.

    const: ``value`` (python value) and ``ctype`` (null/bool/int/uint/double/string/bytes);
    ident: ``name``; select: ``args[0]`` operand, ``name`` field, ``test_only``;
    call: ``name`` function, ``target`` (member receiver) and ``args``;
    list: ``args``; map: ``entries`` (key, value); struct: ``name`` + ``fields``;
    comp: ``iter_var``, ``accu_var`` and ``args`` = (range, init, cond, step, result).
    """

    id: int
    kind: NodeKind
    name: str = ""
    value: object = None
    ctype: str = ""
    target: Node | None = None
    args: tuple[Node, ...] = ()
    entries: tuple[tuple[Node, Node], ...] = ()
    fields: tuple[tuple[str, Node], ...] = ()
    test_only: bool = False
    iter_var: str = ""
    accu_var: str = ""

    def children(self) -> tuple[Node, ...]:
        out: list[Node] = []
        if self.target is not None:
            out.append(self.target)
        out.extend(self.args)
        for k, v in self.entries:
            out.extend((k, v))
        out.extend(v for _, v in self.fields)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class CheckedAst:
    """The decoded CheckedExpr: root, node offsets and resolved ident names."""

    root: Node
    positions: dict[int, int] = field(default_factory=dict)
    references: dict[int, str] = field(default_factory=dict)


def _const(buf: bytes) -> tuple[object, str]:
    f = _fields(buf)
    if 1 in f:
        return None, "null"
    if 2 in f:
        return bool(_one_int(f, 2)), "bool"
    if 3 in f:
        return _signed(_one_int(f, 3)), "int"
    if 4 in f:
        return _one_int(f, 4), "uint"
    if 5 in f:
        raw = _one_bytes(f, 5)
        if raw is None or len(raw) != 8:
            raise AstDecodeError("bad double constant")
        return struct.unpack("<d", raw)[0], "double"
    if 6 in f:
        return _str(f, 6), "string"
    if 7 in f:
        return _one_bytes(f, 7) or b"", "bytes"
    raise AstDecodeError("unsupported constant")


def _expr(buf: bytes, depth: int = 0) -> Node:
    if depth > 500:
        raise AstDecodeError("expression nested too deeply")
    f = _fields(buf)
    nid = _one_int(f, 2)
    d = depth + 1
    if (b := _one_bytes(f, 3)) is not None:
        value, ctype = _const(b)
        return Node(nid, "const", value=value, ctype=ctype)
    if (b := _one_bytes(f, 4)) is not None:
        return Node(nid, "ident", name=_str(_fields(b), 1))
    if (b := _one_bytes(f, 5)) is not None:
        s = _fields(b)
        operand = _one_bytes(s, 1)
        args = (_expr(operand, d),) if operand is not None else ()
        return Node(nid, "select", name=_str(s, 2), args=args, test_only=bool(_one_int(s, 3)))
    if (b := _one_bytes(f, 6)) is not None:
        c = _fields(b)
        tgt = _one_bytes(c, 1)
        target = _expr(tgt, d) if tgt is not None else None
        call_args = tuple(_expr(a, d) for a in c.get(3, []) if isinstance(a, bytes))
        return Node(nid, "call", name=_str(c, 2), target=target, args=call_args)
    if (b := _one_bytes(f, 7)) is not None:
        lf = _fields(b)
        elems = tuple(_expr(a, d) for a in lf.get(1, []) if isinstance(a, bytes))
        return Node(nid, "list", args=elems)
    if (b := _one_bytes(f, 8)) is not None:
        sf = _fields(b)
        msg = _str(sf, 1)
        entries: list[tuple[Node, Node]] = []
        flds: list[tuple[str, Node]] = []
        for raw in sf.get(2, []):
            if not isinstance(raw, bytes):
                raise AstDecodeError("bad struct entry")
            ef = _fields(raw)
            val = _one_bytes(ef, 4)
            if val is None:
                raise AstDecodeError("struct entry without value")
            mk = _one_bytes(ef, 3)
            if mk is not None:
                entries.append((_expr(mk, d), _expr(val, d)))
            else:
                flds.append((_str(ef, 2), _expr(val, d)))
        if msg:
            return Node(nid, "struct", name=msg, fields=tuple(flds))
        return Node(nid, "map", entries=tuple(entries))
    if (b := _one_bytes(f, 9)) is not None:
        cf = _fields(b)
        parts = []
        for num in (2, 4, 5, 6, 7):
            raw_part = _one_bytes(cf, num)
            if raw_part is None:
                raise AstDecodeError("incomplete comprehension")
            parts.append(_expr(raw_part, d))
        return Node(nid, "comp", iter_var=_str(cf, 1), accu_var=_str(cf, 3), args=tuple(parts))
    raise AstDecodeError(f"expression node {nid} has no kind")


def decode_checked(serialized: bytes) -> CheckedAst:
    """Decode ``Expression.serialize()`` output (an Any holding a CheckedExpr)."""
    try:
        outer = _fields(serialized)
        payload = _one_bytes(outer, 2)
        type_url = _str(outer, 1)
        if payload is None or not type_url.endswith("CheckedExpr"):
            raise AstDecodeError(f"not a CheckedExpr: {type_url or 'no type url'}")
        ce = _fields(payload)
        expr_b = _one_bytes(ce, 4)
        if expr_b is None:
            raise AstDecodeError("CheckedExpr without expr")
        root = _expr(expr_b)
        positions: dict[int, int] = {}
        si = _one_bytes(ce, 5)
        if si is not None:
            for raw in _fields(si).get(4, []):
                if isinstance(raw, bytes):
                    pf = _fields(raw)
                    positions[_one_int(pf, 1)] = _one_int(pf, 2)
        refs: dict[int, str] = {}
        for raw in ce.get(2, []):
            if isinstance(raw, bytes):
                rf = _fields(raw)
                ref = _one_bytes(rf, 2)
                if ref is not None:
                    refs[_one_int(rf, 1)] = _str(_fields(ref), 1)
        return CheckedAst(root, positions, refs)
    except (UnicodeDecodeError, struct.error) as exc:
        raise AstDecodeError(str(exc)) from None


def parse_expr(text: str) -> Node | None:
    """Parse ``text`` without type checking to the node tree (None if it has no expression).

    Parse errors raise the binding's RuntimeError, as ``env.compile`` does.
    """
    from cel_expr_python import cel  # the CEL runtime stays out of this module's import

    env = cel.NewEnv(variables={"event": cel.Type.DYN, "now": cel.Type.TIMESTAMP})
    outer = _fields(env.compile(text, disable_check=True).serialize())
    payload = _one_bytes(outer, 2)
    if payload is None:
        return None
    expr = _one_bytes(_fields(payload), 2)
    return None if expr is None else _expr(expr)


# --- walking and printing -------------------------------------------------------------


def walk(node: Node, depth: int = 0) -> list[tuple[Node, int]]:
    """Every node with its comprehension nesting depth, pre-order, iteratively."""
    out: list[tuple[Node, int]] = []
    stack: list[tuple[Node, int]] = [(node, depth)]
    while stack:
        n, d = stack.pop()
        out.append((n, d))
        if n.kind == "comp" and len(n.args) == 5:
            # range and initial value are evaluated once, outside the loop
            rng, init, cond, step, result = n.args
            stack.extend([(result, d + 1), (step, d + 1), (cond, d + 1), (init, d), (rng, d)])
            continue
        for child in reversed(n.children()):
            stack.append((child, d))
    return out


_LOGICAL = ("_&&_", "_||_")


def _flatten(node: Node, fn: str) -> list[Node]:
    if node.kind == "call" and node.name == fn and node.target is None:
        out: list[Node] = []
        for a in node.args:
            out.extend(_flatten(a, fn))
        return out
    return [node]


def _lit(node: Node) -> str:
    if node.ctype == "string":
        return json.dumps(node.value, ensure_ascii=False)
    if node.ctype == "bytes":
        raw = node.value if isinstance(node.value, bytes) else b""
        return 'b"' + "".join(f"\\x{c:02x}" for c in raw) + '"'
    if node.ctype == "null":
        return "null"
    if node.ctype == "bool":
        return "true" if node.value else "false"
    if node.ctype == "uint":
        return f"{node.value}u"
    return repr(node.value)


def _duration_literal_ms(arg: Node) -> int | None:
    """A ``duration("…")`` literal in ms, so "60m" and "1h" hash alike."""
    if arg.kind != "const" or arg.ctype != "string":
        return None
    text = str(arg.value)
    if "d" in text or text.endswith(("us", "ns")) or text.startswith("-"):
        return None
    try:
        return parse_duration_ms(text)
    except DurationError:
        return None


def canonical(node: Node, refs: dict[int, str] | None = None) -> str:
    """The id-free canonical S-expression of ``node`` (the semantic hash input)."""
    refs = refs or {}

    def go(n: Node) -> str:
        if n.kind == "const":
            return _lit(n)
        if n.kind == "ident":
            return refs.get(n.id) or n.name
        if n.kind == "select":
            if n.id in refs:  # the checker resolved a qualified name (e.g. a.b)
                return refs[n.id]
            inner = go(n.args[0]) if n.args else "?"
            return f"has({inner}.{n.name})" if n.test_only else f"{inner}.{n.name}"
        if n.kind == "call":
            if n.name == "duration" and n.target is None and len(n.args) == 1:
                ms = _duration_literal_ms(n.args[0])
                if ms is not None:
                    return f"duration({ms}ms)"
            if n.name in _LOGICAL and n.target is None:
                parts = [go(a) for a in _flatten(n, n.name)]
                return f"{n.name}({','.join(parts)})"
            args = ",".join(go(a) for a in n.args)
            if n.target is not None:
                return f"{go(n.target)}.{n.name}({args})"
            return f"{n.name}({args})"
        if n.kind == "list":
            return "[" + ",".join(go(a) for a in n.args) + "]"
        if n.kind == "map":
            return "{" + ",".join(f"{go(k)}:{go(v)}" for k, v in n.entries) + "}"
        if n.kind == "struct":
            return n.name + "{" + ",".join(f"{k}:{go(v)}" for k, v in n.fields) + "}"
        inner = ",".join(go(a) for a in n.args)
        return f"comp({n.iter_var},{n.accu_var},{inner})"

    return go(node)


_INFIX = {
    "_==_": ("==", 3),
    "_!=_": ("!=", 3),
    "_<_": ("<", 3),
    "_<=_": ("<=", 3),
    "_>_": (">", 3),
    "_>=_": (">=", 3),
    "@in": ("in", 3),
    "_+_": ("+", 4),
    "_-_": ("-", 4),
    "_*_": ("*", 5),
    "_/_": ("/", 5),
    "_%_": ("%", 5),
    "_&&_": ("&&", 2),
    "_||_": ("||", 1),
}


def _is_accu(n: Node, accu: str) -> bool:
    return n.kind == "ident" and n.name == accu


def _appends(n: Node, accu: str) -> Node | None:
    """``accu + [e]`` -> e."""
    if n.kind == "call" and n.name == "_+_" and len(n.args) == 2 and _is_accu(n.args[0], accu):
        lst = n.args[1]
        if lst.kind == "list" and len(lst.args) == 1:
            return lst.args[0]
    return None


def _macro(n: Node) -> tuple[str, Node, tuple[Node, ...]] | None:
    """Recognise the standard macro expansions so ``rules show`` prints them back."""
    if len(n.args) != 5:
        return None
    rng, init, _cond, step, result = n.args
    accu = n.accu_var
    if not _is_accu(result, accu) and not (
        result.kind == "call" and result.name == "_==_" and _is_accu(result.args[0], accu)
    ):
        return None
    two = step.kind == "call" and len(step.args) == 2 and _is_accu(step.args[0], accu)
    if init.kind == "const" and init.ctype == "bool" and two:
        if init.value is True and step.name == "_&&_":
            return "all", rng, (step.args[1],)
        if init.value is False and step.name == "_||_":
            return "exists", rng, (step.args[1],)
    if (
        init.kind == "const"
        and init.ctype == "int"
        and init.value == 0
        and step.kind == "call"
        and step.name == "_?_:_"
        and len(step.args) == 3
    ):
        return "exists_one", rng, (step.args[0],)
    if init.kind == "list" and not init.args:
        mapped = _appends(step, accu)
        if mapped is not None:
            return "map", rng, (mapped,)
        if step.kind == "call" and step.name == "_?_:_" and len(step.args) == 3:
            kept = _appends(step.args[1], accu)
            if kept is not None and kept.kind == "ident" and kept.name == n.iter_var:
                return "filter", rng, (step.args[0],)
            if kept is not None:
                return "map", rng, (step.args[0], kept)
    return None


def unparse(node: Node, refs: dict[int, str] | None = None) -> str:
    """Readable CEL for ``rules show``: one line, minimal parentheses, macros expanded."""
    refs = refs or {}

    def go(n: Node, parent_prec: int = 0) -> str:
        if n.kind == "const":
            return _lit(n)
        if n.kind == "ident":
            return refs.get(n.id) or n.name
        if n.kind == "select":
            if n.id in refs:
                return refs[n.id]
            inner = go(n.args[0], 9) if n.args else "?"
            return f"has({inner}.{n.name})" if n.test_only else f"{inner}.{n.name}"
        if n.kind == "call":
            if n.target is None and n.name in _INFIX and len(n.args) == 2:
                op, prec = _INFIX[n.name]
                if n.name in _LOGICAL:
                    parts = [go(a, prec + 1) for a in _flatten(n, n.name)]
                    text = f" {op} ".join(parts)
                else:
                    text = f"{go(n.args[0], prec)} {op} {go(n.args[1], prec + 1)}"
                return f"({text})" if prec < parent_prec else text
            if n.name in ("!_", "-_") and len(n.args) == 1:
                operand = go(n.args[0], 8)
                if operand.startswith(("!", "-")):  # the parser folds "!!x" and "--x" away
                    operand = f"({operand})"
                return n.name[0] + operand
            if n.name == "_?_:_" and len(n.args) == 3:
                text = " ? ".join([go(n.args[0], 1), go(n.args[1], 1)]) + " : " + go(n.args[2], 0)
                return f"({text})" if parent_prec > 0 else text
            if n.name == "_[_]" and len(n.args) == 2:
                return f"{go(n.args[0], 9)}[{go(n.args[1])}]"
            args = ", ".join(go(a) for a in n.args)
            if n.target is not None:
                return f"{go(n.target, 9)}.{n.name}({args})"
            return f"{n.name}({args})"
        if n.kind == "list":
            return "[" + ", ".join(go(a) for a in n.args) + "]"
        if n.kind == "map":
            return "{" + ", ".join(f"{go(k)}: {go(v)}" for k, v in n.entries) + "}"
        if n.kind == "struct":
            return n.name + "{" + ", ".join(f"{k}: {go(v)}" for k, v in n.fields) + "}"
        macro = _macro(n)
        if macro is not None:
            name, rng, margs = macro
            return f"{go(rng, 9)}.{name}({n.iter_var}, {', '.join(go(p) for p in margs)})"
        inner = ", ".join(go(a) for a in n.args)
        return f"__comprehension__({n.iter_var}, {n.accu_var}, {inner})"

    return go(node)


def _is_event_type(node: Node, refs: dict[int, str]) -> bool:
    if node.kind != "select" or node.name != "type" or node.test_only or not node.args:
        return False
    operand = node.args[0]
    return operand.kind == "ident" and (refs.get(operand.id) or operand.name) == "event"


def type_guard(root: Node, refs: dict[int, str] | None = None) -> frozenset[str] | None:
    """The event types a rule can possibly match, when its top-level ``&&`` says so.

    If one conjunct of the top-level ``&&`` chain is ``event.type == "lit"`` (or
    ``event.type in ["a", "b"]``), any row of another type makes that conjunct
    false, and in CEL ``false && x`` is false whatever ``x`` is (even an
    error). The runner can then reject such rows without entering CEL at all;
    None means no such guard was found.
    """
    refs = refs or {}
    guard: frozenset[str] | None = None
    for conj in _flatten(root, "_&&_"):
        if conj.kind != "call" or conj.target is not None or len(conj.args) != 2:
            continue
        left, right = conj.args
        found: frozenset[str] | None = None
        if conj.name == "_==_":
            for a, b in ((left, right), (right, left)):
                if _is_event_type(a, refs) and b.kind == "const" and b.ctype == "string":
                    found = frozenset({str(b.value)})
        elif (
            conj.name == "@in"
            and _is_event_type(left, refs)
            and right.kind == "list"
            and all(e.kind == "const" and e.ctype == "string" for e in right.args)
        ):
            found = frozenset(str(e.value) for e in right.args)
        if found is not None:
            guard = found if guard is None else guard & found
    return guard
