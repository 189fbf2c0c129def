"""The in-memory window index: the fast primitive host for live evaluation and backtest.

Why it exists: the three primitives (``count``, ``distinct``, ``exists``) see
journal rows with ``seq <=`` the evaluated row's seq and ``at > now - window``.
Asking SQLite once per call costs tens of microseconds; a backtest over 2.25M
rows needs a few microseconds per row in total. Because rows are fed in seq
order and ``at`` never decreases, every primitive's answer can be kept in
sliding-window buckets that are appended on the right and expired on the left.

The shapes a rule set can ask for are known statically (selector keys,
distinct field, literal window), so only those are indexed. Selector keys
whose value is a string literal in *every* rule that uses the shape become a
row filter: a ``type == "restart"`` shape never touches the millions of
``tool_call`` rows.

Semantics shared with :mod:`engine.rules.evaluation.host_sql` (a test proves both agree):
an absent (NULL) column reads as ``""`` for selector matching; ``distinct``
counts distinct non-empty values of its field; every result saturates at
:data:`SATURATION`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from engine.rules.language.model import SELECTOR_KEYS

#: Every result is capped here, so a runaway selector cannot produce unbounded numbers.
SATURATION = 1_000_000


#: Column order of a journal row tuple as read by :data:`ROW_SELECT`.
COLUMNS = ("seq", "at", *SELECTOR_KEYS, "n")
COL = {name: i for i, name in enumerate(COLUMNS)}

#: Reads rows with text columns coalesced to ``""`` so tuples can be keyed
#: directly (``n`` stays raw: it is never a selector key).
ROW_VALUES = "seq, at, " + ", ".join(f"COALESCE({k}, '')" for k in SELECTOR_KEYS) + ", n"
ROW_SELECT = f"SELECT {ROW_VALUES} FROM rule_journal"

#: How many fed rows between sweeps that drop expired entries from untouched buckets.
SWEEP_EVERY = 50_000

Row = Sequence[Any]


class SelectorNotIndexed(LookupError):
    """A primitive asked for a shape the loaded rules never declared (a bug, not bad input)."""


@dataclass(frozen=True)
class Shape:
    """One primitive call site, as far as indexing cares.

    ``literals`` pairs selector keys with their literal value at this call
    site (keys whose value is computed at run time are absent).
    """

    fn: str
    keys: tuple[str, ...]
    window_ms: int
    field: str | None = None
    literals: tuple[tuple[str, str], ...] = ()


class _CountIndex:
    """Buckets of ``at`` values for one (keys, window): answers count and exists."""

    __slots__ = ("buckets", "getkey", "window_ms")

    def __init__(
        self, keys: tuple[str, ...], window_ms: int, columns: Mapping[str, int] = COL
    ) -> None:
        self.window_ms = window_ms
        self.getkey = _key_getter(keys, columns)
        self.buckets: dict[Any, deque[int]] = {}

    def add(self, row: Row) -> None:
        key = self.getkey(row)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = deque()
        bucket.append(row[1])

    def add_count(self, row: Row) -> int:
        """``add(row)``, then what ``query`` answers for the row's own key at its ``at``."""
        key = self.getkey(row)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = deque()
        at = row[1]
        bucket.append(at)
        edge = at - self.window_ms
        while bucket[0] <= edge:  # the row just added is inside its own window
            bucket.popleft()
        return len(bucket)

    def query(self, key: Any, now_ms: int) -> int:
        bucket = self.buckets.get(key)
        if not bucket:
            return 0
        edge = now_ms - self.window_ms
        while bucket and bucket[0] <= edge:
            bucket.popleft()
        return len(bucket)

    def sweep(self, now_ms: int) -> None:
        edge = now_ms - self.window_ms
        dead = []
        for key, bucket in self.buckets.items():
            while bucket and bucket[0] <= edge:
                bucket.popleft()
            if not bucket:
                dead.append(key)
        for key in dead:
            del self.buckets[key]


class _DistinctIndex:
    """Buckets of (at, value) with a live multiset per bucket: answers distinct."""

    __slots__ = ("buckets", "field_col", "getkey", "window_ms")

    def __init__(
        self,
        keys: tuple[str, ...],
        field_name: str,
        window_ms: int,
        columns: Mapping[str, int] = COL,
    ) -> None:
        self.window_ms = window_ms
        self.getkey = _key_getter(keys, columns)
        self.field_col = columns[field_name]
        self.buckets: dict[Any, tuple[deque[tuple[int, str]], dict[str, int]]] = {}

    def add(self, row: Row) -> None:
        value = row[self.field_col]
        if not value:
            return
        key = self.getkey(row)
        entry = self.buckets.get(key)
        if entry is None:
            entry = self.buckets[key] = (deque(), {})
        entries, counts = entry
        entries.append((row[1], value))
        counts[value] = counts.get(value, 0) + 1

    def _expire(self, entries: deque[tuple[int, str]], counts: dict[str, int], edge: int) -> None:
        while entries and entries[0][0] <= edge:
            _, value = entries.popleft()
            left = counts[value] - 1
            if left:
                counts[value] = left
            else:
                del counts[value]

    def add_count(self, row: Row) -> int:
        """``add(row)``, then what ``query`` answers for the row's own key at its ``at``."""
        value = row[self.field_col]
        key = self.getkey(row)
        entry = self.buckets.get(key)
        if value:
            if entry is None:
                entry = self.buckets[key] = (deque(), {})
            entries, counts = entry
            entries.append((row[1], value))
            counts[value] = counts.get(value, 0) + 1
        elif entry is None:
            return 0
        else:
            entries, counts = entry
        edge = row[1] - self.window_ms
        while entries and entries[0][0] <= edge:  # ``_expire``, inlined: a call per row costs
            _, old = entries.popleft()
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        return len(counts)

    def query(self, key: Any, now_ms: int) -> int:
        entry = self.buckets.get(key)
        if entry is None:
            return 0
        self._expire(entry[0], entry[1], now_ms - self.window_ms)
        return len(entry[1])

    def sweep(self, now_ms: int) -> None:
        edge = now_ms - self.window_ms
        dead = []
        for key, (entries, counts) in self.buckets.items():
            self._expire(entries, counts, edge)
            if not entries:
                dead.append(key)
        for key in dead:
            del self.buckets[key]


_Index = _CountIndex | _DistinctIndex


def bucket_index(
    keys: tuple[str, ...], field: str | None, window_ms: int, columns: Mapping[str, int] = COL
) -> _Index:
    """The sliding-window buckets of one (keys, distinct field, window) group, as the index keeps.

    ``add(row)`` then ``query(key, now_ms)`` give what the window index answers at
    that row; ``columns`` maps names to positions in the rows given to ``add``.
    """
    if field is None:
        return _CountIndex(keys, window_ms, columns)
    return _DistinctIndex(keys, field, window_ms, columns)


class WindowIndex:
    """A :class:`PrimitiveHost` over rows fed in seq order.

    Call :meth:`feed` with every journal row (in seq order) *before* evaluating
    it; the host's ``now`` is the last fed row's ``at`` unless set explicitly
    with :meth:`set_now`, and it only ever holds rows up to the last fed one,
    so a primitive cannot see the future.
    """

    def __init__(self, shapes: Iterable[Shape]) -> None:
        self.now_ms = 0
        self.seq = 0
        self._indexes: dict[tuple[tuple[str, ...], str | None, int], _Index] = {}
        self._always: list[_Index] = []
        # column -> value -> indexes filtered on that value (other filters checked after)
        self._dispatch: dict[
            int, dict[str, list[tuple[_Index, tuple[tuple[int, frozenset[str]], ...]]]]
        ] = {}
        self._filters: dict[
            tuple[tuple[str, ...], str | None, int], tuple[tuple[str, frozenset[str]], ...]
        ] = {}
        self._since_sweep = 0
        self.max_window_ms = 0
        self._build(list(shapes))

    # -- construction -------------------------------------------------------------

    def _build(self, shapes: list[Shape]) -> None:
        groups: dict[tuple[tuple[str, ...], str | None, int], list[Shape]] = {}
        for shape in shapes:
            keys = tuple(sorted(shape.keys))
            fld = shape.field if shape.fn == "distinct" else None
            groups.setdefault((keys, fld, shape.window_ms), []).append(shape)
            self.max_window_ms = max(self.max_window_ms, shape.window_ms)
        for (keys, fld, window), members in groups.items():
            index = bucket_index(keys, fld, window)
            self._indexes[(keys, fld, window)] = index
            filters = _literal_filters(keys, members)
            self._filters[(keys, fld, window)] = tuple(
                (COLUMNS[col], allowed) for col, allowed in filters
            )
            if not filters:
                self._always.append(index)
                continue
            (col, values), rest = filters[0], tuple(filters[1:])
            table = self._dispatch.setdefault(col, {})
            for value in values:
                table.setdefault(value, []).append((index, rest))

    # -- feeding ------------------------------------------------------------------

    def feed(self, row: Row) -> None:
        """Add one journal row (a tuple in :data:`COLUMNS` order); rows must come in seq order."""
        self.seq = row[0]
        self.now_ms = row[1]
        for index in self._always:
            index.add(row)
        for col, table in self._dispatch.items():
            hits = table.get(row[col])
            if hits:
                for index, rest in hits:
                    if not rest or all(row[c] in allowed for c, allowed in rest):
                        index.add(row)
        self._since_sweep += 1
        if self._since_sweep >= SWEEP_EVERY:
            self.sweep()

    def sweep(self) -> None:
        """Drop entries that fell out of every window (bounds memory on long replays)."""
        self._since_sweep = 0
        for index in self._indexes.values():
            index.sweep(self.now_ms)

    def feed_filters(self) -> list[tuple[tuple[str, frozenset[str]], ...]]:
        """Per index, the literal filters a row must pass to be added (empty: every row).

        A replay that reads only some rows must still read all of these, or
        the aggregates would undercount (see :mod:`engine.rules.language.prefilter`).
        """
        return list(self._filters.values())

    def set_now(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def index_for(
        self, fn: str, field: str | None, keys: Sequence[str], window_ms: int
    ) -> tuple[_Index, tuple[tuple[str, frozenset[str]], ...]] | None:
        """The index answering this call shape and its literal filters (None: not fed here).

        For callers that ask the same shape on every row (the evaluator's gates,
        :mod:`engine.rules.language.gates`): they build the bucket key themselves and call
        ``index.query(key, host.now_ms)``, skipping the per-call lookup. They
        must apply the filters as :meth:`_lookup` does (a value outside them is
        refused, never answered).
        """
        key = (tuple(sorted(keys)), field if fn == "distinct" else None, window_ms)
        index = self._indexes.get(key)
        return None if index is None else (index, self._filters[key])

    # -- the PrimitiveHost protocol -----------------------------------------------

    def _lookup(
        self, selector: Mapping[str, str], fld: str | None, window_ms: int
    ) -> tuple[_Index, Any]:
        keys = tuple(sorted(selector))
        index = self._indexes.get((keys, fld, window_ms))
        if index is None:
            raise SelectorNotIndexed(
                f"no index for selector keys {list(keys)} window {window_ms}ms"
                + (f" field {fld}" if fld else "")
            )
        for name, allowed in self._filters[(keys, fld, window_ms)]:
            if selector[name] not in allowed:
                # Only rows with these literal values were indexed; answering
                # would silently undercount, so refuse (the rule is disabled).
                raise SelectorNotIndexed(
                    f"selector {name}={selector[name]!r} is outside the indexed literals"
                )
        if not keys:
            return index, None
        key = selector[keys[0]] if len(keys) == 1 else tuple(selector[k] for k in keys)
        return index, key

    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        index, key = self._lookup(selector, None, window_ms)
        return min(index.query(key, self.now_ms), SATURATION)

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        index, key = self._lookup(selector, None, window_ms)
        return index.query(key, self.now_ms) > 0

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        index, key = self._lookup(selector, field, window_ms)
        return min(index.query(key, self.now_ms), SATURATION)

    def entries(self) -> int:
        """Entries currently held (for tests and memory figures)."""
        total = 0
        for index in self._indexes.values():
            for bucket in index.buckets.values():
                total += len(bucket[0]) if isinstance(bucket, tuple) else len(bucket)
        return total


def _key_getter(keys: tuple[str, ...], columns: Mapping[str, int] = COL) -> Callable[[Row], Any]:
    """A fast row -> bucket key function (a scalar for one key, a tuple for more).

    ``columns`` maps names to tuple positions: :data:`COL` for journal rows, another
    map for the narrower rows of a sweep (:mod:`engine.rules.evaluation.sweeps`).
    """
    if not keys:
        return _const_key
    return itemgetter(*(columns[k] for k in keys))


def _const_key(row: Row) -> None:
    """An empty selector matches every row: one bucket keyed ``None``."""
    return None


def group_filters(
    shapes: Iterable[Shape],
) -> dict[tuple[tuple[str, ...], str | None, int], tuple[tuple[str, frozenset[str]], ...]]:
    """Per index (keys, distinct field, window), the literal filters its feed applies.

    The same grouping :class:`WindowIndex` builds, for planners that decide
    which indexes to feed before building one.
    """
    groups: dict[tuple[tuple[str, ...], str | None, int], list[Shape]] = {}
    for shape in shapes:
        fld = shape.field if shape.fn == "distinct" else None
        groups.setdefault((tuple(sorted(shape.keys)), fld, shape.window_ms), []).append(shape)
    return {
        key: tuple((COLUMNS[col], allowed) for col, allowed in _literal_filters(key[0], members))
        for key, members in groups.items()
    }


def _literal_filters(
    keys: tuple[str, ...], members: list[Shape]
) -> list[tuple[int, frozenset[str]]]:
    """Columns every member pins to literals, with the union of those literals.

    ``type`` and ``kind`` go first: they split the journal best, so the
    dispatch table keyed on them skips most rows with one dict lookup.
    """
    order = sorted(keys, key=lambda k: (k not in ("type", "kind"), k))
    filters = []
    for key in order:
        values = [dict(m.literals).get(key) for m in members]
        if all(v is not None for v in values):
            filters.append((COL[key], frozenset(str(v) for v in values)))
    return filters


# -- planning: what to index and which rows a rule can skip ---------------------------


@dataclass(frozen=True)
class RulePlan:
    """What static analysis of one rule's ``when`` found.

    ``guards`` are top-level ``&&`` conjuncts of the form ``event.F == "lit"``
    or ``event.F in ["a", "b"]``: when a row fails one, the conjunction is
    false whatever the other conjuncts do (CEL's ``&&`` absorbs errors on a
    false side), so skipping the evaluation changes no result. ``shapes`` are
    the rule's primitive call sites with literal selector values (a value
    ``event.F`` guarded to one literal counts as that literal, since the call
    only runs when the guard holds).
    """

    guards: tuple[tuple[str, frozenset[str]], ...]
    shapes: tuple[Shape, ...]


def plan_rule(rule: Any) -> RulePlan:
    """Analyse ``rule`` (a :class:`~.model.Rule`); never raises for odd input."""
    specs = tuple(getattr(rule, "primitives", ()))
    from engine.rules.language.celast import AstDecodeError

    try:
        root = _parse(str(rule.when))
    except (RuntimeError, AstDecodeError):  # the binding's parse error; any other is a bug
        root = None
    guards: dict[str, frozenset[str]] = {}
    sites: list[Shape] = []
    if root is not None:
        for conj in _conjuncts(root):
            guard = _guard(conj)
            if guard is not None:
                name, values = guard
                guards[name] = guards[name] & values if name in guards else values
        sites = [s for s in (_site(n, guards) for n in _walk(root)) if s is not None]
    shapes: list[Shape] = []
    for spec in specs:
        keys = tuple(sorted(spec.selector_keys))
        fld = spec.field if spec.fn == "distinct" else None
        matching = [
            s
            for s in sites
            if s.fn == spec.fn
            and s.keys == keys
            and s.field == fld
            and s.window_ms == spec.window_ms
        ]
        if matching:
            shapes.extend(matching)
        else:
            shapes.append(Shape(spec.fn, keys, spec.window_ms, fld))
    return RulePlan(tuple(sorted(guards.items())), tuple(dict.fromkeys(shapes)))


_STRING_FIELDS = frozenset(SELECTOR_KEYS)


def _parse(text: str) -> Any:
    """Parse (without type checking) to the celast node tree."""
    from engine.rules.language.celast import parse_expr

    return parse_expr(text)


def _walk(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children())
    return out


def _conjuncts(node: Any) -> list[Any]:
    if node.kind == "call" and node.name == "_&&_" and node.target is None:
        return [c for a in node.args for c in _conjuncts(a)]
    return [node]


def _event_field(node: Any) -> str | None:
    if (
        node.kind == "select"
        and not node.test_only
        and len(node.args) == 1
        and node.args[0].kind == "ident"
        and node.args[0].name == "event"
        and node.name in _STRING_FIELDS
    ):
        return str(node.name)
    return None


def _str_const(node: Any) -> str | None:
    if node.kind == "const" and node.ctype == "string":
        return str(node.value)
    return None


def _guard(node: Any) -> tuple[str, frozenset[str]] | None:
    if node.kind != "call" or node.target is not None or len(node.args) != 2:
        return None
    a, b = node.args
    if node.name == "_==_":
        for f, v in ((a, b), (b, a)):
            name, value = _event_field(f), _str_const(v)
            if name is not None and value is not None:
                return name, frozenset({value})
    if node.name == "@in" and b.kind == "list":
        name = _event_field(a)
        values = [_str_const(x) for x in b.args]
        if name is not None and values and all(v is not None for v in values):
            return name, frozenset(str(v) for v in values)
    return None


def _site(node: Any, guards: Mapping[str, frozenset[str]]) -> Shape | None:
    if node.kind != "call" or node.target is not None:
        return None
    if node.name not in ("count", "exists", "distinct"):
        return None
    args = node.args
    if len(args) != (3 if node.name == "distinct" else 2):
        return None
    fld = _str_const(args[0]) if node.name == "distinct" else None
    selector, window = args[-2], args[-1]
    if selector.kind != "map" or window.kind != "call" or window.name != "duration":
        return None
    if len(window.args) != 1 or _str_const(window.args[0]) is None:
        return None
    from engine.durations import DurationError, parse_duration_ms

    try:
        window_ms = parse_duration_ms(str(_str_const(window.args[0])))
    except DurationError:
        return None
    keys, literals = [], []
    for k, v in selector.entries:
        key = _str_const(k)
        if key is None:
            return None
        keys.append(key)
        value = _str_const(v)
        if value is None:
            guarded = guards.get(_event_field(v) or "")
            if guarded is not None and len(guarded) == 1:
                value = next(iter(guarded))
        if value is not None:
            literals.append((key, value))
    return Shape(node.name, tuple(sorted(keys)), window_ms, fld, tuple(sorted(literals)))
