"""The journal row model and its admission check.

Rules read the journal and nothing else, and the journal must never carry agent
text (a message or a trace line could leak through a rule's message or be used
to steer a rule). So a row is a fixed set of columns, each of which holds an
enum, an identifier, a digest, a path or a bounded integer, and every row is
checked here before it reaches the store. A refused row raises
:class:`RowError` naming the field; nothing of it is stored.

Enums (pinned in DESIGN.md, except ``outcome`` which is defined here):

- ``kind``: run_event, graph_event, fact_event, tick.
- ``type`` per kind: see :data:`TYPES_BY_KIND`.
- ``source`` per kind: run_event rows come from observer, ledger or loopguard;
  graph_event from graph; fact_event from facts; tick from tick.
- ``outcome``: ``ok`` (succeeded), ``error`` (the tool or harness raised),
  ``failed`` (ran and reported failure, e.g. a non-zero verify), ``timeout``,
  ``cancelled`` (stopped by the operator, a guard or a budget), ``denied``
  (refused by a permission or policy check).

Shapes: identifiers (harness, project, run, tool, other_harness, fact) match
``[A-Za-z0-9._:/@+-]{1,256}`` and never start with ``-`` (an identifier is
substituted into operators' action commands, where a leading ``-`` would be
read as an option); digests are ``sha256:`` + 64 lowercase hex;
paths are 1..4096 printable characters (no control characters); ``n`` is an
int (not bool) within ±2**31; ``at`` is ms since the epoch, 0..253402300799999.

The in-store (and fast-path) form of a row is a tuple in :data:`INSERT_COLUMNS`
order; :func:`check_values` checks that form, :func:`row_from_mapping` turns a
JSON object into it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.errors import Diagnostic, InputError, Location

#: Every column of ``rule_journal`` in table order (pinned in DESIGN.md).
COLUMNS: tuple[str, ...] = (
    "seq",
    "at",
    "kind",
    "type",
    "source",
    "harness",
    "project",
    "run",
    "tool",
    "outcome",
    "path",
    "cause_digest",
    "args_digest",
    "other_harness",
    "fact",
    "n",
)
#: The columns a writer supplies (``seq`` is assigned by the committer).
INSERT_COLUMNS: tuple[str, ...] = COLUMNS[1:]
#: The optional columns (after at, kind, type, source).
OPTIONAL_COLUMNS: tuple[str, ...] = INSERT_COLUMNS[4:]
#: Position of each column in an insert tuple.
INSERT_INDEX: dict[str, int] = {name: i for i, name in enumerate(INSERT_COLUMNS)}

TYPES_BY_KIND: dict[str, tuple[str, ...]] = {
    "run_event": (
        "tool_call",
        "run_started",
        "run_finished",
        "verify_failed",
        "restart",
        "loop_stopped",
        "budget_exhausted",
    ),
    "graph_event": ("file_edited", "collision", "churn"),
    "fact_event": ("fact_added", "fact_retracted"),
    "tick": ("tick",),
}
KINDS: tuple[str, ...] = tuple(TYPES_BY_KIND)
#: Type names are unique across kinds, so a row may omit ``kind``.
KIND_OF_TYPE: dict[str, str] = {t: k for k, ts in TYPES_BY_KIND.items() for t in ts}
SOURCES: tuple[str, ...] = ("observer", "ledger", "loopguard", "graph", "facts", "tick")
SOURCES_BY_KIND: dict[str, tuple[str, ...]] = {
    "run_event": ("observer", "ledger", "loopguard"),
    "graph_event": ("graph",),
    "fact_event": ("facts",),
    "tick": ("tick",),
}
#: Source used when a row omits ``source``.
DEFAULT_SOURCE_BY_TYPE: dict[str, str] = {
    **{t: "observer" for t in TYPES_BY_KIND["run_event"]},
    "loop_stopped": "loopguard",
    "budget_exhausted": "ledger",
    **{t: "graph" for t in TYPES_BY_KIND["graph_event"]},
    **{t: "facts" for t in TYPES_BY_KIND["fact_event"]},
    "tick": "tick",
}
OUTCOMES: tuple[str, ...] = ("ok", "error", "failed", "timeout", "cancelled", "denied")

#: Optional columns each kind may carry; the rules engine declares CEL ``event``
#: fields from the same table (DESIGN.md "Fields of event per kind").
FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "run_event": (
        "harness",
        "project",
        "run",
        "tool",
        "outcome",
        "path",
        "cause_digest",
        "args_digest",
        "n",
    ),
    "graph_event": ("harness", "project", "run", "path", "other_harness", "n"),
    "fact_event": ("harness", "project", "run", "fact", "n"),
    "tick": (),
}
#: Columns a type cannot do without (a collision with no other harness says nothing).
REQUIRED_BY_TYPE: dict[str, tuple[str, ...]] = {
    "tool_call": ("harness", "tool"),
    "run_started": ("harness", "run"),
    "run_finished": ("harness", "run", "outcome"),
    "verify_failed": ("harness", "cause_digest"),
    "restart": ("harness", "cause_digest"),
    "loop_stopped": ("harness",),
    "budget_exhausted": ("harness",),
    "file_edited": ("harness", "path"),
    "collision": ("harness", "path", "other_harness"),
    "churn": ("harness", "path"),
    "fact_added": ("fact",),
    "fact_retracted": ("fact",),
    "tick": (),
}

IDENT_FIELDS = frozenset({"harness", "project", "run", "tool", "other_harness", "fact"})
DIGEST_FIELDS = frozenset({"cause_digest", "args_digest"})
#: The journal's identifier: never starting with ``-``, so it can never become an option.
IDENT_RE = re.compile(r"[A-Za-z0-9._:/@+][A-Za-z0-9._:/@+-]{0,255}")
IDENT_RULE = "[A-Za-z0-9._:/@+-], 1-256 chars, not starting with '-'"
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
MAX_PATH = 4096
N_MIN, N_MAX = -(2**31), 2**31 - 1
AT_MAX = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

_REQUIRED: dict[str, tuple[int, ...]] = {
    t: tuple(INSERT_INDEX[f] for f in fields) for t, fields in REQUIRED_BY_TYPE.items()
}
_OUTCOME_SET = frozenset(OUTCOMES)
_ident_match = IDENT_RE.fullmatch
_digest_match = DIGEST_RE.fullmatch

InsertRow = tuple[Any, ...]


class RowError(InputError):
    """A row refused at admission; ``field`` names the offending column."""

    title = "Refused row"

    def __init__(self, field: str, problem: str, *, location: Location | None = None) -> None:
        self.field = field
        self.problem = problem
        loc = location or Location()
        super().__init__(
            f"{field}: {problem}",
            diagnostics=[Diagnostic(problem, loc, path=field, code="row")],
        )

    def at_line(self, file: str, line: int) -> RowError:
        """The same refusal, located at ``file:line`` (for JSON-lines input)."""
        return RowError(self.field, self.problem, location=Location(file, line))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_IDENT, _DIGEST, _PATH, _OUTCOME, _N = range(5)
_CODE = {
    **{f: _IDENT for f in IDENT_FIELDS},
    **{f: _DIGEST for f in DIGEST_FIELDS},
    "path": _PATH,
    "outcome": _OUTCOME,
    "n": _N,
}
#: Per kind: (index, shape code) of the columns it may carry, and the indexes it may not.
_PLAN: dict[str, tuple[tuple[tuple[int, int], ...], tuple[int, ...]]] = {
    kind: (
        tuple((INSERT_INDEX[f], _CODE[f]) for f in fields),
        tuple(i for i in range(4, 15) if INSERT_COLUMNS[i] not in fields),
    )
    for kind, fields in FIELDS_BY_KIND.items()
}
#: Strings already known to have a shape. Fleets repeat the same harness, run,
#: tool and path names, so a set lookup replaces most regex matches; the cache
#: is bounded and cleared when full.
_KNOWN: tuple[set[str], set[str], set[str]] = (set(), set(), set())
_KNOWN_MAX = 100_000


def _bad_shape(i: int, code: int, v: object) -> RowError | None:
    """None if ``v`` has the shape ``code`` wants, else the refusal."""
    name = INSERT_COLUMNS[i]
    if code == _IDENT:
        if type(v) is str and _ident_match(v):
            return None
        return RowError(name, f"not an identifier ({IDENT_RULE}): {_short(v)}")
    if code == _DIGEST:
        if type(v) is str and _digest_match(v):
            return None
        return RowError(name, f"not a digest (sha256:<64 hex>): {_short(v)}")
    if code == _PATH:
        if type(v) is not str or not v:
            return RowError("path", f"must be a non-empty string, got {_short(v)}")
        if len(v) > MAX_PATH:
            return RowError("path", f"too long ({len(v)} chars, at most {MAX_PATH})")
        if not v.isprintable():
            return RowError("path", f"contains control or non-printable characters: {_short(v)}")
        return None
    if code == _OUTCOME:
        if type(v) is str and v in _OUTCOME_SET:
            return None
        return RowError("outcome", f"unknown outcome {_short(v)} (expected: {', '.join(OUTCOMES)})")
    if type(v) is int and N_MIN <= v <= N_MAX:
        return None
    return RowError("n", f"must be an integer within ±2**31, got {_short(v)}")


def check_values(values: InsertRow) -> None:
    """Refuse ``values`` (an insert tuple, ``at`` included) unless every column is well-formed.

    Kept flat and cached because admission and the 45-day simulator run it
    millions of times.
    """
    if len(values) != 15:
        raise RowError("row", f"expected 15 columns, got {len(values)}")
    at, kind, typ, source = values[0], values[1], values[2], values[3]
    if type(at) is not int or not 0 <= at <= AT_MAX:
        raise RowError("at", f"must be an integer of ms since the epoch, got {_short(at)}")
    allowed_types = TYPES_BY_KIND.get(kind) if isinstance(kind, str) else None
    if allowed_types is None:
        raise RowError("kind", f"unknown kind {_short(kind)} (expected one of: {', '.join(KINDS)})")
    if typ not in allowed_types:
        raise RowError(
            "type", f"unknown type {_short(typ)} for {kind} (expected: {', '.join(allowed_types)})"
        )
    if source not in SOURCES_BY_KIND[kind]:
        raise RowError(
            "source",
            f"source {_short(source)} cannot write {kind} rows "
            f"(expected: {', '.join(SOURCES_BY_KIND[kind])})",
        )
    checks, absent = _PLAN[kind]
    for i in absent:
        if values[i] is not None:
            raise RowError(INSERT_COLUMNS[i], f"{kind} rows do not carry this field")
    known = _KNOWN
    for i, code in checks:
        v = values[i]
        if v is None:
            continue
        if code < _OUTCOME:
            cache = known[code]
            if type(v) is str and v in cache:  # a dict or list is unhashable: refuse, not crash
                continue
            err = _bad_shape(i, code, v)
            if err is not None:
                raise err
            if len(cache) >= _KNOWN_MAX:
                cache.clear()
            cache.add(v)
        else:
            err = _bad_shape(i, code, v)
            if err is not None:
                raise err
    for i in _REQUIRED[typ]:
        if values[i] is None:
            raise RowError(INSERT_COLUMNS[i], f"required for {typ} rows")


_KNOWN_KEYS = frozenset(COLUMNS)


def row_from_mapping(obj: object, *, with_at: bool) -> InsertRow:
    """Turn a JSON object into a checked insert tuple.

    ``with_at``: history import (the row carries its own ``at``); otherwise the
    row is admitted now and must not carry ``at``, whose value the committer
    assigns (as it assigns ``seq``, which no input may carry). ``kind`` and
    ``source`` may be omitted: the type implies the kind, and each type has a
    usual source. The returned tuple has ``at`` = 0 when ``with_at`` is false.
    """
    if not isinstance(obj, Mapping):
        raise RowError("row", f"expected a JSON object, got {type(obj).__name__}")
    if not _KNOWN_KEYS.issuperset(obj):
        unknown = next(k for k in obj if k not in _KNOWN_KEYS)
        # A plain name as itself; an empty or odd one (a lone surrogate) as its repr.
        name = str(unknown)
        name = name if _ident_match(name) and len(name) <= 60 else _short(name)
        raise RowError(name, "unknown field (rows carry only the journal columns)")
    if "seq" in obj:
        raise RowError("seq", "assigned at admission; rows must not carry it")
    if with_at:
        if "at" not in obj:
            raise RowError("at", "required for history import (ms since the epoch)")
        at = obj["at"]
    else:
        if "at" in obj:
            raise RowError("at", "assigned at admission; use `harness journal import` for history")
        at = 0
    typ = obj.get("type")
    if typ is None:
        raise RowError("type", "required")
    kind = obj.get("kind")
    if kind is None:
        if not isinstance(typ, str) or typ not in KIND_OF_TYPE:
            raise RowError("type", f"unknown type {_short(typ)}")
        kind = KIND_OF_TYPE[typ]
    source = obj.get("source")
    if source is None and isinstance(typ, str):
        source = DEFAULT_SOURCE_BY_TYPE.get(typ)
    get = obj.get
    values = (
        at,
        kind,
        typ,
        source,
        get("harness"),
        get("project"),
        get("run"),
        get("tool"),
        get("outcome"),
        get("path"),
        get("cause_digest"),
        get("args_digest"),
        get("other_harness"),
        get("fact"),
        get("n"),
    )
    check_values(values)
    return values


def row_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A stored row (tuple in :data:`COLUMNS` order) as a dict without NULL columns."""
    return {c: v for c, v in zip(COLUMNS, row, strict=True) if v is not None}
