"""Load-time checks over the checked CEL AST: primitives, windows, nesting, cost.

The type checker already guarantees that only the declared ``event`` fields,
``now``, the CEL standard library and the three primitives are referenced.
What it cannot know is the contract that makes a rule cheap and replayable:
each primitive's selector is a map *literal* with literal keys from the
indexed columns, its window a literal ``duration("…")`` of at most seven
days, at most eight call sites, bounded comprehension nesting, and a static
cost estimate within ``cost_limit``. Literals are what let us bound the
journal lookback and the cost before the rule ever runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.durations import DurationError, parse_duration_ms
from engine.rules.language.celast import CheckedAst, Node, walk
from engine.rules.language.model import (
    MAX_PRIMITIVE_CALLS,
    MAX_WINDOW_MS,
    PRIMITIVE_COST,
    PRIMITIVES,
    SELECTOR_KEYS,
    PrimitiveFn,
    PrimitiveSpec,
)

#: Deepest allowed comprehension nesting (``all``/``exists``/``map``/``filter``).
MAX_COMPREHENSION_NESTING = 2
#: Cost of one non-primitive node (an operator, a literal, a field read).
NODE_COST = 1
#: Iterations assumed for a comprehension whose range size is not a literal.
UNKNOWN_RANGE = 100


@dataclass(frozen=True, slots=True)
class Finding:
    """A check failure at ``offset`` (code points into the ``when`` text)."""

    offset: int
    message: str
    code: str


@dataclass(frozen=True, slots=True)
class CheckReport:
    findings: tuple[Finding, ...]
    primitives: tuple[PrimitiveSpec, ...]
    static_cost: int
    base_cost: int


def _window(node: Node) -> tuple[int | None, str | None]:
    """The literal window in ms, or an error message."""
    if (
        node.kind != "call"
        or node.name != "duration"
        or node.target is not None
        or len(node.args) != 1
        or node.args[0].kind != "const"
        or node.args[0].ctype != "string"
    ):
        return None, 'window must be a literal duration("…"), e.g. duration("1h")'
    text = str(node.args[0].value)
    try:
        ms = _cel_duration_ms(text)
    except DurationError as exc:
        return None, str(exc)
    if ms <= 0:
        return None, "window must be positive"
    if ms > MAX_WINDOW_MS:
        return None, f"window {text} is longer than the maximum 168h"
    return ms, None


def cel_window_ms(node: Node) -> int | None:
    """The window a valid literal ``duration("…")`` argument stands for, else None."""
    ms, err = _window(node)
    return ms if err is None else None


def _cel_duration_ms(text: str) -> int:
    """CEL duration literals use h/m/s/ms (and us/ns); no days."""
    if text.endswith("ns") or text.endswith("us"):
        raise DurationError(f"window {text!r} is finer than a millisecond")
    if "d" in text:
        raise DurationError(f"invalid CEL duration {text!r}: use hours, e.g. '168h'")
    return parse_duration_ms(text)


def _check_primitive(node: Node, index: int, out: list[Finding], pos: int) -> PrimitiveSpec | None:
    fn = node.name
    expected = 3 if fn == "distinct" else 2
    if len(node.args) != expected:
        out.append(Finding(pos, f"{fn} takes {expected} arguments", "primitive"))
        return None
    field: str | None = None
    args = node.args
    ok = True
    if fn == "distinct":
        f = args[0]
        if f.kind != "const" or f.ctype != "string" or f.value not in SELECTOR_KEYS:
            out.append(
                Finding(
                    pos,
                    "distinct's field must be a string literal naming one of: "
                    + ", ".join(SELECTOR_KEYS),
                    "distinct_field",
                )
            )
            ok = False
        else:
            field = str(f.value)
        args = args[1:]
    selector, window = args
    keys: list[str] = []
    if selector.kind != "map":
        out.append(Finding(pos, f"{fn}'s selector must be a map literal", "selector"))
        ok = False
    else:
        for k, _v in selector.entries:
            if k.kind != "const" or k.ctype != "string":
                out.append(Finding(pos, "selector keys must be string literals", "selector"))
                ok = False
            elif k.value not in SELECTOR_KEYS:
                out.append(
                    Finding(
                        pos,
                        f"selector key {k.value!r} is not one of: " + ", ".join(SELECTOR_KEYS),
                        "selector",
                    )
                )
                ok = False
            elif k.value in keys:
                out.append(Finding(pos, f"selector key {k.value!r} repeated", "selector"))
                ok = False
            else:
                keys.append(str(k.value))
    ms, err = _window(window)
    if err is not None:
        out.append(Finding(pos, f"{fn}: {err}", "window"))
        ok = False
    if not ok or ms is None:
        return None
    prim: PrimitiveFn = "count" if fn == "count" else "distinct" if fn == "distinct" else "exists"
    return PrimitiveSpec(index, prim, field, tuple(keys), ms)


def _range_size(node: Node) -> int:
    if node.kind == "list":
        return len(node.args)
    if node.kind == "map":
        return len(node.entries)
    if node.kind == "comp" and node.args:
        return _range_size(node.args[0])
    return UNKNOWN_RANGE


def _cost(node: Node) -> tuple[int, int]:
    """(non-primitive cost, primitive calls weighted by enclosing iterations)."""
    stack: list[tuple[Node, int]] = [(node, 1)]
    base = 0
    prim = 0
    while stack:
        n, mult = stack.pop()
        if n.kind == "call" and n.target is None and n.name in PRIMITIVES:
            prim += mult
        else:
            base += NODE_COST * mult
        if n.kind == "comp" and len(n.args) == 5:
            rng, init, cond, step, result = n.args
            size = _range_size(rng)
            stack.extend([(rng, mult), (init, mult), (result, mult)])
            stack.extend([(cond, mult * size), (step, mult * size)])
        else:
            stack.extend((c, mult) for c in n.children())
    return base, prim


def check_ast(ast: CheckedAst, cost_limit: int) -> CheckReport:
    """Every finding (not just the first) plus the primitives and cost estimate."""
    findings: list[Finding] = []
    specs: list[PrimitiveSpec] = []
    sites = 0
    nodes = walk(ast.root)
    for node, depth in sorted(nodes, key=lambda nd: ast.positions.get(nd[0].id, 0)):
        pos = ast.positions.get(node.id, 0)
        if node.kind == "comp" and depth + 1 > MAX_COMPREHENSION_NESTING:
            findings.append(
                Finding(
                    pos,
                    f"comprehensions nest deeper than {MAX_COMPREHENSION_NESTING}",
                    "nesting",
                )
            )
        if node.kind == "call" and node.target is None and node.name in PRIMITIVES:
            sites += 1
            spec = _check_primitive(node, len(specs), findings, pos)
            if spec is not None:
                specs.append(spec)
            if depth > 0:
                findings.append(
                    Finding(pos, f"{node.name} may not be called inside a comprehension", "nesting")
                )
    if sites > MAX_PRIMITIVE_CALLS:
        findings.append(
            Finding(
                0, f"{sites} primitive calls; at most {MAX_PRIMITIVE_CALLS} are allowed", "calls"
            )
        )
    base, prim = _cost(ast.root)
    static_cost = base + prim * PRIMITIVE_COST
    if static_cost > cost_limit:
        findings.append(
            Finding(
                0,
                f"estimated cost {static_cost} exceeds the cost limit {cost_limit}",
                "cost",
            )
        )
    return CheckReport(tuple(findings), tuple(specs), static_cost, base)
