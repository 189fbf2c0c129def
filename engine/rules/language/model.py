"""The rule vocabulary every part of Fleet Rules shares: kinds, fields, levels, results.

The loader (``engine.rules.language.loader``) produces :class:`CompiledRule` objects;
the evaluator, backtest, explain, lint and the console only consume them. One
definition of the per-kind fields keeps the CEL type declarations, the message
template check, the ``target`` check and the journal columns from drifting.

Entry points live in ``engine.rules.language.loader`` (``load_rules``,
``compile_rule_text``); they are not re-exported here so this module stays
import-light and free of the CEL runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from engine.errors import Diagnostic
from engine.journal.rows import COLUMNS
from engine.vocab import LEVELS as LEVELS  # re-exported: the loader checks `level`

SourceKind = Literal["starter", "policy", "file"]
PrimitiveFn = Literal["count", "distinct", "exists"]

#: The four journal kinds a rule can be ``on``.
KIND_NAMES: tuple[str, ...] = ("run_event", "graph_event", "fact_event", "tick")

_COMMON: tuple[tuple[str, str], ...] = (
    ("seq", "int"),
    ("kind", "string"),
    ("type", "string"),
    ("source", "string"),
)
_IDS = (("harness", "string"), ("project", "string"), ("run", "string"))

#: Fields of ``event`` per kind, in declaration order, with their CEL type
#: ("string" or "int"); exactly the DESIGN.md table, nothing more.
KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    "run_event": _COMMON
    + _IDS
    + (
        ("tool", "string"),
        ("outcome", "string"),
        ("path", "string"),
        ("cause_digest", "string"),
        ("args_digest", "string"),
        ("n", "int"),
    ),
    "graph_event": _COMMON + _IDS + (("path", "string"), ("other_harness", "string"), ("n", "int")),
    "fact_event": _COMMON + _IDS + (("fact", "string"), ("n", "int")),
    "tick": _COMMON,
}

#: Field names per kind (for ``target`` and message placeholders).
KIND_FIELDS: dict[str, tuple[str, ...]] = {k: tuple(f for f, _ in v) for k, v in KINDS.items()}

#: Keys allowed in a primitive's selector map literal (indexed journal columns).
SELECTOR_KEYS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("seq", "at", "n"))


PRIMITIVES: tuple[str, ...] = ("count", "distinct", "exists")
PRIMITIVE_COST = 100
MAX_PRIMITIVE_CALLS = 8
MAX_WINDOW_MS = 168 * 3_600_000
SATURATION = 1_000_000


@dataclass(frozen=True, slots=True)
class PrimitiveSpec:
    """One primitive call site found in a rule's AST, in source order (``index``)."""

    index: int
    fn: PrimitiveFn
    field: str | None
    selector_keys: tuple[str, ...]
    window_ms: int


@dataclass(frozen=True, slots=True)
class Rule:
    """A validated rule as written, plus what the loader derived from it.

    ``hash`` is the semantic content hash (on, normalized when, level, target,
    cooldown) that shadow and enforce pins key on; ``text`` is the whole source
    file so explain/show can print exactly what was loaded.
    """

    name: str
    description: str
    on: str
    when: str
    level: str
    target: str
    cooldown_ms: int
    message: str
    source_file: str
    source_kind: SourceKind
    text: str
    hash: str
    normalized_when: str
    static_cost: int
    primitives: tuple[PrimitiveSpec, ...]


class PrimitiveHost(Protocol):
    """What a rule may read: three aggregates over journal rows before ``now``.

    The evaluator implements it over the journal (rows with seq <= the
    evaluated row's seq and at > now - window); tests implement it in memory.
    """

    def count(self, selector: Mapping[str, str], window_ms: int) -> int: ...

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int: ...

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One primitive call made during an evaluation: arguments and (saturated) result."""

    fn: str
    field: str | None
    selector: tuple[tuple[str, str], ...]
    window_ms: int
    result: int | bool


@dataclass(frozen=True, slots=True)
class EvalResult:
    """The outcome of evaluating one rule on one row.

    ``error`` is set (and ``matched`` False) for a runtime error or an
    exhausted budget ("cost limit exceeded"); the evaluator disables the rule.
    """

    matched: bool
    calls: tuple[CallRecord, ...]
    cost: int
    error: str | None = None


Runner = Callable[[Mapping[str, object], int, PrimitiveHost], EvalResult]


class CompiledRule:
    """A rule plus its compiled CEL program; one instance serves many evaluations.

    ``evaluate`` takes the journal row as a dict of pinned column names
    (absent = None), ``now_ms`` (the row's ``at``) and the host; it never
    raises for rule-caused problems (see :class:`EvalResult`).
    """

    __slots__ = ("_runner", "prefilter", "rule")

    def __init__(self, rule: Rule, runner: Runner, prefilter: object = None) -> None:
        self.rule = rule
        self._runner = runner
        #: The :class:`engine.rules.language.prefilter.Prefilter` the loader derived from the
        #: checked AST (None: derived on first use by ``prefilter.for_rule``).
        self.prefilter = prefilter

    def evaluate(self, event: Mapping[str, object], now_ms: int, host: PrimitiveHost) -> EvalResult:
        return self._runner(event, now_ms, host)

    def __repr__(self) -> str:
        return f"CompiledRule({self.rule.name!r}, hash={self.rule.hash[:12]})"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """Rules after overrides (later sources win by name) and every error found.

    A rule with errors contributes diagnostics and is left out; other rules
    (of the same ``rules:`` list too) and other files still load, and an
    invalid override leaves the earlier valid version of that name in effect.
    ``warnings`` carries non-fatal findings (e.g. hold/stop acts at notify
    until enforced) so lint and the console can show them.
    """

    rules: tuple[CompiledRule, ...]
    errors: tuple[Diagnostic, ...]
    warnings: tuple[Diagnostic, ...] = ()
