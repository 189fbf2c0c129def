"""Which journal rows a rule can possibly match, proven from its checked CEL AST.

Why: a backtest (and the live evaluator) should pay for the rows a rule can
match, not for the journal's size. For each rule this module derives a
*necessary* condition on indexed journal columns: the rule's ``on`` kind, plus
column equalities that every true evaluation requires. Only these shapes count:

- a top-level ``&&`` conjunct ``event.F == "lit"`` (either operand order);
- a top-level conjunct ``event.F in ["a", "b"]``;
- a top-level conjunct that is an ``||`` of such conditions on the *same* field
  (it becomes one IN list).

A row failing one conjunct makes that conjunct false without error (a string
field compared with string literals cannot error), and CEL's ``false && x`` is
false whatever ``x`` does, so skipping the row changes no result. Anything
else (negation, ternaries, functions, non-literal operands, ``has()``, fields
that are not indexed string columns) adds no condition: the rule is then
evaluated on every row of its kind, as before. Nothing is guessed.

An absent column reads as ``""`` in CEL (the row view drops NULL and ``""``),
so a literal ``""`` admits NULL too, in Python and in SQL alike.

:class:`CandidatePlan` turns the conditions of a rule set (plus the rows the
window index and the fire hooks need) into SQL over the journal's indexes,
which :mod:`engine.rules.backtest` reads merged in seq order.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.celast import Node
from engine.rules.model import SELECTOR_KEYS, CompiledRule

#: Indexed string columns a condition may name (the selector keys).
_FIELDS = frozenset(SELECTOR_KEYS)

Condition = tuple[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class Prefilter:
    """A rule's necessary condition: ``kind == on`` and every ``column IN values``.

    ``conditions`` is sorted by column; an empty tuple means every row of the
    kind. A condition with no values means no row can match.
    """

    kind: str
    conditions: tuple[Condition, ...] = ()

    def get(self, column: str) -> frozenset[str] | None:
        for name, values in self.conditions:
            if name == column:
                return values
        return None

    @property
    def impossible(self) -> bool:
        return any(not values for _, values in self.conditions)

    def term(self) -> Term:
        """The SQL-side form: kind plus the conditions (see :class:`CandidatePlan`)."""
        kinds = frozenset({self.kind})
        if (also := self.get("kind")) is not None:
            kinds &= also  # the rule also tests event.kind: both must hold
        rest = [c for c in self.conditions if c[0] != "kind"]
        return Term(tuple(sorted((("kind", kinds), *rest))))


def derive(root: Node, refs: Mapping[int, str] | None, kind: str) -> Prefilter:
    """The prefilter of a rule ``on: kind`` whose checked ``when`` is ``root``."""
    refs = refs or {}
    found: dict[str, frozenset[str]] = {}
    for conj in _flatten(root, "_&&_"):
        cond = _condition(conj, refs)
        if cond is None:
            continue
        name, values = cond
        found[name] = found[name] & values if name in found else values
    return Prefilter(kind, tuple(sorted(found.items())))


def for_rule(cr: CompiledRule) -> Prefilter:
    """The prefilter the loader attached, or one derived now from a fresh type check.

    A rule built without the loader (tests, custom runners) is compiled again
    for its kind; if that fails for any reason the rule gets no condition
    beyond its kind, which is always safe.
    """
    attached = getattr(cr, "prefilter", None)
    if isinstance(attached, Prefilter):
        return attached
    rule = cr.rule
    try:
        from engine.rules.celast import decode_checked
        from engine.rules.celenv import default_environment

        expr, errors = default_environment().compile(rule.on, rule.when)
        if expr is None or errors:
            return Prefilter(rule.on)
        ast = decode_checked(expr.serialize())
    except Exception:
        return Prefilter(rule.on)
    return derive(ast.root, ast.references, rule.on)


def _flatten(node: Node, fn: str) -> list[Node]:
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == "call" and n.name == fn and n.target is None:
            stack.extend(reversed(n.args))
        else:
            out.append(n)
    return out


def _event_field(node: Node, refs: Mapping[int, str]) -> str | None:
    if node.kind != "select" or node.test_only or len(node.args) != 1:
        return None
    operand = node.args[0]
    if operand.kind != "ident" or (refs.get(operand.id) or operand.name) != "event":
        return None
    return node.name if node.name in _FIELDS else None


def _string(node: Node) -> str | None:
    if node.kind == "const" and node.ctype == "string" and isinstance(node.value, str):
        return node.value
    return None


def _condition(node: Node, refs: Mapping[int, str]) -> Condition | None:
    """``event.F == "lit"``, ``event.F in [...]`` or an ``||`` of those on one field."""
    if node.kind != "call" or node.target is not None:
        return None
    if node.name == "_||_":
        parts = [_condition(d, refs) for d in _flatten(node, "_||_")]
        if not parts or any(p is None for p in parts):
            return None
        names = {p[0] for p in parts if p is not None}
        if len(names) != 1:
            return None
        return names.pop(), frozenset().union(*(p[1] for p in parts if p is not None))
    if len(node.args) != 2:
        return None
    left, right = node.args
    if node.name == "_==_":
        for f, v in ((left, right), (right, left)):
            name, value = _event_field(f, refs), _string(v)
            if name is not None and value is not None:
                return name, frozenset({value})
        return None
    if node.name == "@in" and right.kind == "list":
        name = _event_field(left, refs)
        values = [_string(e) for e in right.args]
        if name is None or not values or any(v is None for v in values):
            return None
        return name, frozenset(v for v in values if v is not None)
    return None


# -- candidate rows for a rule set ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """A conjunction of ``column IN values`` (``""`` also admits NULL); rows matching it."""

    conditions: tuple[Condition, ...]

    def admits(self, other: Term) -> bool:
        """True when every row ``other`` selects is also selected by this term."""
        theirs = dict(other.conditions)
        return all(name in theirs and theirs[name] <= values for name, values in self.conditions)

    def sql(self) -> tuple[str, list[str]]:
        parts: list[str] = []
        params: list[str] = []
        for name, values in self.conditions:
            ordered = sorted(values)
            clause = f"{name} IN ({', '.join('?' * len(ordered))})"
            if "" in values:
                clause = f"({clause} OR {name} IS NULL)"
            parts.append(clause)
            params.extend(ordered)
        return " AND ".join(parts) or "1", params

    @property
    def indexed(self) -> bool:
        """Whether an index can find its rows (``kind`` or ``type`` lead the two indexes)."""
        return any(name in ("kind", "type") for name, _ in self.conditions)


@dataclass(frozen=True, slots=True)
class CandidatePlan:
    """The rows a backtest must read: a union of terms, or ``None`` for every row.

    ``terms`` is minimal (no term admits another) and never holds an
    impossible term (one with an empty value set).
    """

    terms: tuple[Term, ...] | None

    @property
    def everything(self) -> bool:
        return self.terms is None

    def rows(
        self, conn: sqlite3.Connection, select: str, bound: str, params: Sequence[Any]
    ) -> Iterator[tuple[Any, ...]]:
        """Rows matching ``bound`` (a WHERE fragment) and any term, in seq order, once each.

        Terms an index can serve get a query each, merged by seq; the others
        share one scan so the table is read at most once for them.
        """
        if self.terms is None:
            yield from conn.execute(f"{select} WHERE {bound} ORDER BY seq", tuple(params))
            return
        queries: list[tuple[str, list[Any]]] = []
        scanned: list[tuple[str, list[str]]] = []
        for term in self.terms:
            clause, values = term.sql()
            if term.indexed:
                queries.append((f"({clause})", values))
            else:
                scanned.append((clause, values))
        if scanned:
            clause = " OR ".join(f"({c})" for c, _ in scanned)
            queries.append((f"({clause})", [v for _, vs in scanned for v in vs]))
        cursors = [
            conn.execute(f"{select} WHERE {bound} AND {clause} ORDER BY seq", (*params, *values))
            for clause, values in queries
        ]
        last = None
        for row in heapq.merge(*cursors, key=_seq):
            if row[0] != last:
                last = row[0]
                yield row

    def count(self, conn: sqlite3.Connection, bound: str, params: Sequence[Any]) -> int:
        """How many rows :meth:`rows` yields for the same bound (for progress)."""
        if self.terms is None:
            sql = f"SELECT count(*) FROM rule_journal WHERE {bound}"
            return int(conn.execute(sql, tuple(params)).fetchone()[0])
        if not self.terms:
            return 0
        parts: list[str] = []
        values: list[Any] = []
        for term in self.terms:
            clause, vs = term.sql()
            parts.append(f"SELECT seq FROM rule_journal WHERE {bound} AND {clause}")
            values.extend((*params, *vs))
        sql = f"SELECT count(*) FROM ({' UNION '.join(parts)})"
        return int(conn.execute(sql, tuple(values)).fetchone()[0])


def _seq(row: tuple[Any, ...]) -> int:
    return int(row[0])


def minimal_terms(terms: Iterable[Term]) -> tuple[Term, ...]:
    """Drop impossible terms and terms another term admits (keeping the first of equals)."""
    pool = [t for t in dict.fromkeys(terms) if all(values for _, values in t.conditions)]
    keep: list[Term] = []
    for i, term in enumerate(pool):
        if any(
            j != i and other.admits(term) and (not term.admits(other) or j < i)
            for j, other in enumerate(pool)
        ):
            continue
        keep.append(term)
    return tuple(keep)


def candidate_plan(
    rules: Sequence[CompiledRule],
    window_filters: Iterable[tuple[Condition, ...]] | None,
    hook_kinds: frozenset[str] | None,
) -> CandidatePlan:
    """The union of the rules' prefilters, the window index's feeds and the hooks' kinds.

    ``window_filters`` holds, per window index, the literal filters its rows
    must pass (an empty tuple: it needs every row); ``None`` means the host
    is not the window index, whose needs are unknown, so every row is read.
    ``hook_kinds`` is :attr:`FireHooks.row_kinds` (``None``: every row).
    """
    if window_filters is None or hook_kinds is None:
        return CandidatePlan(None)
    terms: list[Term] = [for_rule(cr).term() for cr in rules]
    for filters in window_filters:
        if not filters:
            return CandidatePlan(None)
        terms.append(Term(tuple(sorted(filters))))
    terms.extend(Term((("kind", frozenset({k})),)) for k in sorted(hook_kinds))
    return CandidatePlan(minimal_terms(terms))
