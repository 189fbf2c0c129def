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
false whatever ``x`` does, so skipping the row changes no result. For the same
reason two more kinds of top-level conjunct are kept beside the conditions:
*exclusions* ``event.F != "lit"`` (the row must not hold the literal) and the
aggregate *gates* of :mod:`engine.rules.language.gates`. Anything else (negation,
ternaries, functions, non-literal operands, ``has()``, fields that are not
indexed string columns) adds nothing: the rule is then evaluated on every row
of its kind, as before. Nothing is guessed. When conditions, exclusions and
gates are all a rule's conjuncts (:attr:`Prefilter.complete`), they decide it.

An absent column reads as ``""`` in CEL (the row view drops NULL and ``""``),
so a literal ``""`` admits NULL too, in Python and in SQL alike.

:class:`Term` is a prefilter's SQL form; :mod:`engine.rules.evaluation.candidates` turns
the terms of a rule set (plus the rows the window index and the fire hooks
need) into queries over the journal's indexes, which
:mod:`engine.rules.evaluation.backtest` reads merged in seq order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.rules.language.celast import Node
from engine.rules.language.gates import Gate, derive_gates
from engine.rules.language.model import SELECTOR_KEYS, CompiledRule

#: Indexed string columns a condition may name (the selector keys).
_FIELDS = frozenset(SELECTOR_KEYS)

Condition = tuple[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class Prefilter:
    """A rule's necessary condition: ``kind == on``, every ``column IN values``, every gate.

    ``conditions`` is sorted by column; an empty tuple means every row of the
    kind. A condition with no values means no row can match. ``gates`` are
    the rule's aggregate thresholds (:mod:`engine.rules.language.gates`), which the
    evaluator tests before CEL and a backtest may test in SQL.
    """

    kind: str
    conditions: tuple[Condition, ...] = ()
    gates: tuple[Gate, ...] = ()
    #: ``event.F != "lit"`` conjuncts: (column, values the row must not have), by column.
    exclusions: tuple[Condition, ...] = ()
    #: Every top-level conjunct is a condition, an exclusion or a gate, so the rule
    #: is true exactly when they all hold (the evaluator needs no CEL to decide it).
    complete: bool = False

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
        return Term(tuple(sorted((("kind", kinds), *rest))), exclusion_sql(self.exclusions))


def derive(root: Node, refs: Mapping[int, str] | None, kind: str) -> Prefilter:
    """The prefilter of a rule ``on: kind`` whose checked ``when`` is ``root``."""
    refs = refs or {}
    found: dict[str, frozenset[str]] = {}
    excluded: dict[str, frozenset[str]] = {}
    conjuncts = _flatten(root, "_&&_")
    unused = 0
    for conj in conjuncts:
        cond = _condition(conj, refs)
        if cond is not None:
            name, values = cond
            found[name] = found[name] & values if name in found else values
            continue
        excl = _exclusion(conj, refs)
        if excl is not None:
            name, values = excl
            excluded[name] = excluded.get(name, frozenset()) | values
            continue
        unused += 1
    gates = derive_gates(root, refs, kind)
    complete = unused == len(gates) and not any(g.never for g in gates)
    return Prefilter(
        kind,
        tuple(sorted(found.items())),
        gates,
        tuple(sorted(excluded.items())),
        complete,
    )


def _exclusion(node: Node, refs: Mapping[int, str]) -> Condition | None:
    """``event.F != "lit"`` (either order): false exactly when the column holds ``lit``."""
    if node.kind != "call" or node.target is not None or node.name != "_!=_":
        return None
    if len(node.args) != 2:
        return None
    left, right = node.args
    for f, v in ((left, right), (right, left)):
        name, value = _event_field(f, refs), _string(v)
        if name is not None and value is not None:
            return name, frozenset({value})
    return None


def exclusion_sql(exclusions: Iterable[Condition]) -> tuple[Clause, ...]:
    """Each exclusion as an SQL condition (an absent column reads ``""``, as in CEL)."""
    out: list[Clause] = []
    for name, values in exclusions:
        ordered = tuple(sorted(values))
        marks = ", ".join("?" * len(ordered))
        if "" in values:
            out.append((f"({name} IS NOT NULL AND {name} NOT IN ({marks}))", ordered))
        else:
            out.append((f"({name} IS NULL OR {name} NOT IN ({marks}))", ordered))
    return tuple(out)


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
        from engine.rules.language.celast import decode_checked
        from engine.rules.language.celenv import default_environment

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


#: An SQL condition with its bound values (a gate tested in the candidate query).
Clause = tuple[str, tuple[Any, ...]]

#: Columns the (kind, type) and (type, at) indexes lead with.
_INDEX_LEADS = ("kind", "type")


@dataclass(frozen=True, slots=True)
class Term:
    """Rows where every ``column IN values`` holds (``""`` also admits NULL) and every extra.

    ``extra`` holds SQL conditions a row must also meet: the gates of a rule
    a backtest tests in SQL (see :mod:`engine.rules.evaluation.candidates`).
    """

    conditions: tuple[Condition, ...]
    extra: tuple[Clause, ...] = ()

    def admits(self, other: Term) -> bool:
        """True when every row ``other`` selects is also selected by this term."""
        theirs = dict(other.conditions)
        return all(
            name in theirs and theirs[name] <= values for name, values in self.conditions
        ) and set(self.extra) <= set(other.extra)

    def sql(self) -> tuple[str, list[Any]]:
        prefix, prefix_params = _conditions_sql(self.prefix)
        rest, rest_params = self.residual_sql()
        parts = [p for p in (prefix, rest) if p != "1"]
        return " AND ".join(parts) or "1", prefix_params + rest_params

    @property
    def prefix(self) -> tuple[Condition, ...]:
        """The conditions an index leads with (``kind``, ``type``)."""
        return tuple(c for c in self.conditions if c[0] in _INDEX_LEADS)

    def residual_sql(self) -> tuple[str, list[Any]]:
        """The rest of the term (other columns, extras) as SQL; ``"1"`` when nothing is left."""
        rest = tuple(c for c in self.conditions if c[0] not in _INDEX_LEADS)
        clause, params = _conditions_sql(rest)
        parts = [] if clause == "1" else [clause]
        for sql, values in self.extra:
            parts.append(sql)
            params.extend(values)
        return " AND ".join(parts) or "1", params

    @property
    def indexed(self) -> bool:
        """Whether an index can find its rows (``kind`` or ``type`` lead the two indexes)."""
        return bool(self.prefix)


def _conditions_sql(conditions: Iterable[Condition]) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    for name, values in conditions:
        ordered = sorted(values)
        clause = f"{name} IN ({', '.join('?' * len(ordered))})"
        if "" in values:
            clause = f"({clause} OR {name} IS NULL)"
        parts.append(clause)
        params.extend(ordered)
    return " AND ".join(parts) or "1", params
