"""Aggregate gates: conditions on a rule's primitive results that every true evaluation needs.

Why: most rules end in a threshold, ``... && count({...}, duration("10m")) >= 6``,
and on most rows the threshold fails. The aggregate is cheap to ask (the window
index answers in a microsecond, SQL on an index in a few), the CEL evaluation
is not. A *gate* is a top-level ``&&`` conjunct whose value is a function of one
primitive call alone:

- ``P CMP n`` or ``n CMP P`` with ``P`` a ``count`` or ``distinct`` call, ``CMP``
  one of ``>= > <= < == !=`` and ``n`` an int literal;
- ``P`` or ``!P`` with ``P`` an ``exists`` call;

where every selector value is a string literal or ``event.F`` (a string field
of the rule's kind) and the window a literal ``duration``. When a gate is false
for a row, the rule is false on that row: CEL's ``&&`` is false as soon as one
side is false, whatever the other sides do (errors included), and the loader
bounds each rule's primitive calls by its cost limit, so no other conjunct can
turn the result into a budget error. So the evaluator asks the gate first and
skips the CEL evaluation when it fails (:mod:`engine.rules.evaluation.evaluator`), and a
backtest may test a gate in SQL before a row is even read
(:mod:`engine.rules.evaluation.aggsql`), using :attr:`Gate.floor`: the least result that
can pass, when passing needs the result to reach it.

A gate computes its selector exactly as the execution program's call site does
(:func:`engine.rules.language.celenv._make_site`): a literal as written, ``event.F`` as
the row's value, an absent value as ``""``; results saturate the same way.
Nothing else is a gate: the rule is then decided by CEL alone, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from engine.rules.language.celast import Node
from engine.rules.language.checks import cel_window_ms
from engine.rules.language.model import KINDS, PRIMITIVES, SATURATION, SELECTOR_KEYS, CallRecord

#: How a selector value is obtained: ("lit", the string) or ("row", a column name).
ValueRef = tuple[str, str]

#: CEL comparison functions, and the same comparison with its operands swapped.
_OPS = {"_>=_": ">=", "_>_": ">", "_<=_": "<=", "_<_": "<", "_==_": "==", "_!=_": "!="}
_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}


@dataclass(frozen=True, slots=True)
class Gate:
    """One primitive call and the test its result must pass for the rule to be true.

    ``op`` is a comparison (``>=`` ...) against ``n`` for count and distinct,
    ``exists`` or ``absent`` (``!exists(...)``) for exists. ``selector`` is
    sorted by key.
    """

    fn: str
    field: str | None
    selector: tuple[tuple[str, ValueRef], ...]
    window_ms: int
    op: str
    n: int = 0

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.selector)

    @property
    def shape_key(self) -> tuple[tuple[str, ...], str | None, int]:
        """The window index group this call is answered by (keys, distinct field, window)."""
        return (
            tuple(k for k, _ in self.selector),
            self.field if self.fn == "distinct" else None,
            self.window_ms,
        )

    def passes(self, result: int | bool) -> bool:
        """Whether the conjunct is true for this (saturated) primitive result."""
        op = self.op
        if op == "exists":
            return bool(result)
        if op == "absent":
            return not result
        value, n = int(result), self.n
        if op == ">=":
            return value >= n
        if op == ">":
            return value > n
        if op == "<=":
            return value <= n
        if op == "<":
            return value < n
        if op == "==":
            return value == n
        return value != n

    @property
    def floor(self) -> int | None:
        """The least result that passes when passing needs at least it; None otherwise.

        Results saturate at :data:`SATURATION`, so a floor above it can never
        be reached (the gate is then always false, see :attr:`never`). A gate
        that passes on 0 (``count(...) >= 0``, ``<``, ``!=``, ``absent``) has no floor.
        """
        op, n = self.op, self.n
        if op == "exists":
            least = 1
        elif op == ">=" or op == "==":
            least = n
        elif op == ">":
            least = n + 1
        else:
            return None
        return least if least >= 1 else None

    @property
    def never(self) -> bool:
        """True when no saturated result can pass (e.g. ``count(...) > 1000000``)."""
        floor = self.floor
        return floor is not None and floor > SATURATION


def derive_gates(root: Node, refs: Mapping[int, str] | None, kind: str) -> tuple[Gate, ...]:
    """The gates among the top-level ``&&`` conjuncts of a checked ``when`` (source order)."""
    refs = refs or {}
    strings = frozenset(f for f, t in KINDS.get(kind, ()) if t == "string") & frozenset(
        SELECTOR_KEYS
    )
    gates: list[Gate] = []
    for conj in _conjuncts(root):
        gate = _gate(conj, refs, strings)
        if gate is not None:
            gates.append(gate)  # a repeated conjunct stays: CEL would call it twice
    return tuple(gates)


def _conjuncts(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "call" and n.name == "_&&_" and n.target is None:
            stack.extend(reversed(n.args))
        else:
            out.append(n)
    return out


def _int(node: Node) -> int | None:
    if node.kind == "const" and node.ctype == "int" and isinstance(node.value, int):
        return int(node.value)
    return None


def _gate(node: Node, refs: Mapping[int, str], strings: frozenset[str]) -> Gate | None:
    if node.kind != "call" or node.target is not None:
        return None
    if node.name in PRIMITIVES:
        return _call(node, refs, strings, "exists") if node.name == "exists" else None
    if node.name == "!_" and len(node.args) == 1:
        inner = node.args[0]
        if inner.kind == "call" and inner.name == "exists" and inner.target is None:
            return _call(inner, refs, strings, "absent")
        return None
    op = _OPS.get(node.name)
    if op is None or len(node.args) != 2:
        return None
    left, right = node.args
    for call, lit, cmp in ((left, right, op), (right, left, _FLIP[op])):
        n = _int(lit)
        if n is not None and call.kind == "call" and call.name in ("count", "distinct"):
            return _call(call, refs, strings, cmp, n)
    return None


def _call(
    node: Node, refs: Mapping[int, str], strings: frozenset[str], op: str, n: int = 0
) -> Gate | None:
    """A gate for this primitive call, if every argument is a literal or a row field."""
    if node.target is not None:
        return None
    args = node.args
    field: str | None = None
    if node.name == "distinct":
        if len(args) != 3:
            return None
        f = args[0]
        if f.kind != "const" or f.ctype != "string" or f.value not in SELECTOR_KEYS:
            return None
        field, args = str(f.value), args[1:]
    if len(args) != 2 or args[0].kind != "map":
        return None
    window_ms = cel_window_ms(args[1])
    if window_ms is None:
        return None
    selector: dict[str, ValueRef] = {}
    for k, v in args[0].entries:
        if k.kind != "const" or k.ctype != "string" or k.value not in SELECTOR_KEYS:
            return None
        key = str(k.value)
        if key in selector:
            return None
        ref = _value(v, refs, strings)
        if ref is None:
            return None
        selector[key] = ref
    return Gate(node.name, field, tuple(sorted(selector.items())), window_ms, op, n)


def _value(node: Node, refs: Mapping[int, str], strings: frozenset[str]) -> ValueRef | None:
    if node.kind == "const" and node.ctype == "string" and isinstance(node.value, str):
        return ("lit", node.value)
    if node.kind == "select" and not node.test_only and len(node.args) == 1:
        operand = node.args[0]
        if (
            operand.kind == "ident"
            and (refs.get(operand.id) or operand.name) == "event"
            and node.name in strings
        ):
            return ("row", node.name)
    return None


def gate_record(
    gate: Gate, row: Sequence[Any], columns: Mapping[str, int], host: Any
) -> CallRecord:
    """The call record CEL's call site would log for this gate's primitive on ``row``.

    Row values must be strings here (the caller checks the row first).
    """
    sel = {k: (v if tag == "lit" else row[columns[v]]) for k, (tag, v) in gate.selector}
    result: int | bool
    if gate.fn == "count":
        result = min(int(host.count(sel, gate.window_ms)), SATURATION)
    elif gate.fn == "distinct":
        result = min(int(host.distinct(gate.field or "", sel, gate.window_ms)), SATURATION)
    else:
        result = bool(host.exists(sel, gate.window_ms))
    return CallRecord(gate.fn, gate.field, tuple(sorted(sel.items())), gate.window_ms, result)


#: A compiled gate test: (row tuple, primitive host) -> False when the rule is certainly false.
GateCheck = Callable[[Sequence[Any], Any], bool]


def make_check(gate: Gate, columns: Mapping[str, int], host: Any = None) -> GateCheck:
    """A fast test of ``gate`` on a row tuple (``columns``: column name -> tuple index).

    It returns True (undecided: let CEL evaluate) when a row value is not a
    string, so a malformed row still reaches CEL and is reported there; the
    host's exceptions propagate for the same reason (the caller then lets CEL
    evaluate, which records them as it always did). When ``host`` is a window
    index that feeds this shape, the check reads its bucket directly.
    """
    if gate.never:
        return _never
    generic = _generic_check(gate, columns)
    index_for = getattr(host, "index_for", None)
    found = None if index_for is None else index_for(gate.fn, gate.field, gate.keys, gate.window_ms)
    if found is None:
        return generic
    return _bound_check(gate, columns, host, found, generic) or generic


def _generic_check(gate: Gate, columns: Mapping[str, int]) -> GateCheck:
    """Build the selector as the call site would and ask the host's public methods."""
    lits = {k: v for k, (tag, v) in gate.selector if tag == "lit"}
    cols = tuple((k, columns[v]) for k, (tag, v) in gate.selector if tag == "row")
    fn, fld, window, passes = gate.fn, gate.field or "", gate.window_ms, gate.passes

    def check(row: Sequence[Any], host: Any) -> bool:
        sel = lits.copy()
        for key, col in cols:
            value = row[col]
            if type(value) is not str:
                if value is not None:
                    return True
                value = ""
            sel[key] = value
        if fn == "count":
            return passes(min(int(host.count(sel, window)), SATURATION))
        if fn == "distinct":
            return passes(min(int(host.distinct(fld, sel, window)), SATURATION))
        return passes(bool(host.exists(sel, window)))

    return check


def _bound_check(
    gate: Gate,
    columns: Mapping[str, int],
    host: Any,
    found: tuple[Any, tuple[tuple[str, frozenset[str]], ...]],
    generic: GateCheck,
) -> GateCheck | None:
    """The same test reading the window index's bucket directly (None: not worth it).

    The bucket key is the selector's values in sorted key order (one value
    alone for one key), exactly what the index's lookup builds. A value the
    index's literal filters exclude is left to ``generic``, which asks the
    host and so gets the same refusal CEL would.
    """
    index, filters = found
    refs = dict(gate.selector)
    allowed_rows: list[tuple[int, frozenset[str]]] = []
    for name, allowed in filters:
        tag, value = refs[name]
        if tag == "lit":
            if value not in allowed:
                return None
        else:
            allowed_rows.append((columns[value], allowed))
    row_cols = tuple(columns[v] for _, (tag, v) in gate.selector if tag == "row")
    key_of = _key_builder(tuple(refs[k] for k in gate.keys), columns)
    query, checks = index.query, tuple(allowed_rows)
    passes = count_test(gate)

    def check(row: Sequence[Any], host_now: Any) -> bool:
        for col in row_cols:
            if type(row[col]) is not str:
                return generic(row, host_now)
        for col, allowed in checks:
            if row[col] not in allowed:
                return generic(row, host_now)
        return passes(query(key_of(row), host.now_ms))

    return check


def count_test(gate: Gate) -> Callable[[int], bool]:
    """The gate's test on the raw number a window bucket holds (rows, or distinct values).

    Exists passes on a count above zero, comparisons on the saturated count:
    the same as :meth:`Gate.passes` on the call's result, as one call.
    """
    if gate.op == "exists":
        return (0).__lt__
    if gate.op == "absent":
        return (0).__eq__
    return _count_test(gate.op, gate.n)


def _count_test(op: str, n: int) -> Callable[[int], bool]:
    """``saturated(count) OP n`` as one call (results cap at :data:`SATURATION`)."""
    cap = SATURATION
    if op == ">=":
        return lambda v: (v if v < cap else cap) >= n
    if op == ">":
        return lambda v: (v if v < cap else cap) > n
    if op == "<=":
        return lambda v: (v if v < cap else cap) <= n
    if op == "<":
        return lambda v: (v if v < cap else cap) < n
    if op == "==":
        return lambda v: (v if v < cap else cap) == n
    return lambda v: (v if v < cap else cap) != n


def _key_builder(
    refs: tuple[ValueRef, ...], columns: Mapping[str, int]
) -> Callable[[Sequence[Any]], Any]:
    """Row -> the window index's bucket key for these selector values (sorted by key).

    One key is the value itself, several a tuple, none the single bucket ``None``;
    the common shapes get a closure without a loop.
    """
    if not refs:
        return _no_key
    if all(tag == "row" for tag, _ in refs):
        return itemgetter(*(columns[v] for _, v in refs))
    if len(refs) == 1:
        constant = refs[0][1]
        return lambda row: constant
    if len(refs) == 2:
        (tag_a, a), (tag_b, b) = refs
        if tag_a == "row":
            col_a = columns[a]
            return lambda row: (row[col_a], b)
        if tag_b == "row":
            col_b = columns[b]
            return lambda row: (a, row[col_b])
        return lambda row: (a, b)
    plan = tuple((tag == "row", columns[v] if tag == "row" else 0, v) for tag, v in refs)
    return lambda row: tuple(row[c] if is_row else v for is_row, c, v in plan)


def _no_key(row: Sequence[Any]) -> None:
    return None


def _never(row: Sequence[Any], host: Any) -> bool:
    return False
