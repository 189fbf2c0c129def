"""``skillspec decide --inputs FILE --json``: many decision lines, each as one decide writes it.

Why a batch path: a decision line is about a kilobyte (the route, its order,
every forbid, the matched rules with their reasons) for an input of a few
words, and building a :class:`~engine.skillspec.decide.Decision` then
encoding it costs about twenty microseconds per input, five times a JSON echo
of the same line. Three facts make it cheap:

- Everything after ``"input"`` depends only on which rules matched, so it is
  built straight from per-rule pieces encoded once per spec (selection,
  order, reason, entry; each list item's encoding), never through a
  ``Decision``, and remembered per matched-rule set.
- Deciding is a pure function of the text, so an input seen before in the
  batch gets the line it got then (inputs repeat in real batches: replays,
  evaluation sets).
- Input lines that are plain JSON strings are read by the C decoder; any
  other line goes through :func:`engine.jsontext.loads` for its exact error.

The text is the same as ``decision_json_line(decide(spec, text))``, byte for
byte; ``tests/skillspec/test_decide_batch.py`` checks it on every corpus
spec against digests of the lines the previous implementation wrote.
"""

from __future__ import annotations

from _json import encode_basestring as _enc  # json's C string encoder (no ASCII escaping)
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from engine.skillspec.decide import (
    BASIS_DEFAULT,
    BASIS_ROUTE_ORDER,
    BASIS_RULE_PREFER,
    DEFAULT_REASON,
    CompiledSpec,
    allow_json,
    matched_indices,
)

#: Remember at most this many characters of lines by input, and of line tails by rule set.
MEMO_CHARS = 64 * 1024 * 1024


def _opt(value: str | None) -> str:
    return "null" if value is None else _enc(value)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_enc, values)) + "]"


def _selection(route: str, basis: str, rule_id: str | None, reason: str | None) -> str:
    return (
        f'{{"route": {_enc(route)}, "basis": {_enc(basis)}, '
        f'"rule_id": {_opt(rule_id)}, "reason": {_opt(reason)}}}'
    )


class _Tables:
    """Per-rule pieces of a decision line, encoded once for a spec (indexed by rule index).

    List fields keep each item already encoded: the encoding is one-to-one,
    so dropping repeats of an encoded item drops the same items as dropping
    repeats of the raw ones (first occurrence kept).
    """

    __slots__ = (
        "allow",
        "default",
        "entry",
        "lists",
        "order",
        "orders",
        "prefer",
        "prefers",
        "reason",
        "reasons",
        "with_allow",
    )

    def __init__(self, compiled: CompiledSpec) -> None:
        rules = compiled.rules
        #: forbid, elicit and after_success of each rule, each item encoded
        self.lists = [
            [tuple(map(_enc, getattr(r, name))) for r in rules]
            for name in ("forbid", "elicit", "after_success")
        ]
        self.allow = [r.allow for r in rules]
        self.with_allow = frozenset(r.index for r in rules if r.allow)
        self.entry = [compiled.entries[r.index].json for r in rules]
        self.reason = [_enc(r.reason) if r.reason else "null" for r in rules]
        self.reasons = frozenset(r.index for r in rules if r.reason)
        #: (route json, selection json) of a rule's prefer
        self.prefer = [
            (_enc(r.prefer), _selection(r.prefer, BASIS_RULE_PREFER, r.id, r.reason))
            if r.prefer is not None
            else None
            for r in rules
        ]
        self.prefers = frozenset(r.index for r in rules if r.prefer is not None)
        #: (order json, route json, selection json) of a rule's route_order
        self.order = [
            (
                _list(r.route_order),
                _enc(r.route_order[0]),
                _selection(r.route_order[0], BASIS_ROUTE_ORDER, r.id, r.reason),
            )
            if r.route_order
            else None
            for r in rules
        ]
        self.orders = frozenset(r.index for r in rules if r.route_order)
        default = compiled.default_route_order
        self.default = (
            (
                _list(default),
                _enc(default[0]),
                _selection(default[0], BASIS_DEFAULT, None, DEFAULT_REASON),
            )
            if default
            else ("[]", "null", "null")
        )

    def tail(self, matched: Sequence[int]) -> str:
        """The line after ``"input": ...,`` for these matched rules (indices in file order)."""
        # The last rule (highest index) with a prefer, a route_order, a reason.
        last_prefer = max(self.prefers.intersection(matched), default=None)
        last_order = max(self.orders.intersection(matched), default=None)
        last_reason = max(self.reasons.intersection(matched), default=None)
        chosen = None if last_order is None else self.order[last_order]
        order = self.default if chosen is None else chosen
        if last_prefer is not None:
            prefer = self.prefer[last_prefer]
            assert prefer is not None  # last_prefer is a rule with a prefer
            route, selection = prefer
        else:
            _, route, selection = order
        reason = "null" if last_reason is None else self.reason[last_reason]
        allow = "{}"
        if not self.with_allow.isdisjoint(matched):
            merged: dict[str, Any] = {}
            for i in matched:
                merged.update(self.allow[i])
            allow = allow_json({k: merged[k] for k in sorted(merged)})
        forbid, elicit, after = (
            ", ".join(dict.fromkeys(chain.from_iterable(map(items.__getitem__, matched))))
            for items in self.lists
        )
        entries = ", ".join(map(self.entry.__getitem__, matched))
        return (
            f'"route": {route}, "route_selection": {selection}, "route_order": {order[0]}, '
            f'"forbid": [{forbid}], "allow": {allow}, "elicit": [{elicit}], '
            f'"after_success": [{after}], "matched_rules": [{entries}], "reason": {reason}}}'
        )


class BatchDecider:
    """Decision lines for inputs of one spec, remembering lines and tails already built."""

    def __init__(self, compiled: CompiledSpec) -> None:
        self.compiled = compiled
        self.tables = _Tables(compiled)
        self.lines: dict[str, str] = {}
        self.tails: dict[tuple[int, ...], str] = {}
        self._room = MEMO_CHARS

    def line(self, text: str) -> str:
        """``decision_json_line(decide(compiled, text))``."""
        found = self.lines.get(text)
        if found is not None:
            return found
        matched = matched_indices(self.compiled, text)
        tail = self.tails.get(matched)
        if tail is None:
            tail = self.tables.tail(matched)
            if self._room > 0:
                self.tails[matched] = tail
                self._room -= len(tail)
        line = f'{{"input": {_enc(text)}, {tail}'
        if self._room > 0:
            self.lines[text] = line
            self._room -= len(line)
        return line

    def lines_for(self, texts: Iterable[str]) -> Iterator[str]:
        line = self.line
        return (line(t) for t in texts)
