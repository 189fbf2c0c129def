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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from engine.skillspec.decide import (
    BASIS_DEFAULT,
    BASIS_ROUTE_ORDER,
    BASIS_RULE_PREFER,
    DEFAULT_REASON,
    CompiledRule,
    CompiledSpec,
    allow_json,
)
from engine.skillspec.matching import (
    BOOLEAN_PREDICATES,
    AllOf,
    bit_positions,
)

#: Remember at most this many characters of lines by input, and of line tails by rule set.
MEMO_CHARS = 64 * 1024 * 1024
#: A memo keeps every new entry up to this many, then only while it pays (see BatchDecider).
WARM = 2048
KEEP_RATIO = 8


def _opt(value: str | None) -> str:
    return "null" if value is None else _enc(value)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_enc, values)) + "]"


def _selection(route: str, basis: str, rule_id: str | None, reason: str | None) -> str:
    return (
        f'{{"route": {_enc(route)}, "basis": {_enc(basis)}, '
        f'"rule_id": {_opt(rule_id)}, "reason": {_opt(reason)}}}'
    )


class _Masks:
    """A spec's rules as bits of one integer, so which rules an input matches is a few int ops.

    One :class:`~engine.skillspec.matching.PhraseMatcher` scan gives, ORed
    together over the phrases found: the bit of every rule with a single
    phrase group (``user_says_any`` alone, or one ``user_says_all_groups``
    entry) that the phrase belongs to, an :class:`~engine.skillspec.matching.AllOf`
    bit for every group of the rules that need several, and a bit per boolean
    predicate whose keyword occurs. Rules with only boolean predicates are
    always candidates; the predicate bits then pick, from a table of every
    combination, the rules whose booleans hold. The result equals
    :func:`~engine.skillspec.decide.matched_indices` (a property test checks).
    """

    __slots__ = (
        "allowed",
        "always",
        "group_mask",
        "group_shift",
        "groups",
        "matcher",
        "multi",
        "pred_shift",
        "rule_mask",
    )

    def __init__(self, compiled: CompiledSpec) -> None:
        rules = compiled.rules
        count = len(rules)
        used = [n for n in BOOLEAN_PREDICATES if any(n == b for r in rules for b, _ in r.booleans)]
        payload = [0] * len(compiled.index.phrases)
        self.always = 0
        multi: list[tuple[int, list[frozenset[int]]]] = []
        for rule in rules:
            need = ([rule.any_ids] if rule.any_phrases else []) + list(rule.group_ids)
            if not rule.has_condition or not all(need):
                continue  # never matches: no condition, or a group of empty phrases only
            if not need:
                self.always |= 1 << rule.index
            elif len(need) == 1:
                for pid in need[0]:
                    payload[pid] |= 1 << rule.index
            else:
                multi.append((rule.index, need))
        self.groups = AllOf(
            [[(n, k) for k in range(len(need))] for n, (_, need) in enumerate(multi)]
        )
        #: AllOf block start bit -> the rule bit it stands for
        self.multi = {start: 1 << multi[n][0] for start, n in self.groups.owner.items()}
        for n, (_, need) in enumerate(multi):
            for k, group in enumerate(need):
                for pid in group:
                    payload[pid] |= self.groups.bits[(n, k)] << count
        self.pred_shift = shift = count + len(multi) * self.groups.width
        for k, name in enumerate(used):
            for pid in compiled.bool_ids[name]:
                payload[pid] |= 1 << (shift + k)
        self.rule_mask = (1 << count) - 1
        self.group_shift = count
        self.group_mask = (1 << shift) - 1 - self.rule_mask
        #: per combination of predicate bits, the rules whose booleans hold in it
        plain = sum(1 << r.index for r in rules if not r.booleans)
        checked = [r for r in rules if r.booleans]
        self.allowed = [
            plain + sum(1 << r.index for r in checked if _booleans_hold(r, used, state))
            for state in range(1 << len(used))
        ]
        self.matcher = compiled.index.matcher(payload)

    def matched(self, text: str) -> int:
        """The bits of the rules ``text`` (as given, not yet lower-cased) matches."""
        found = self.matcher.scan(text.lower())
        rules = found & self.rule_mask | self.always
        groups = found & self.group_mask
        if groups:
            met = self.groups.met(groups >> self.group_shift)
            if met:
                multi = self.multi
                for start in bit_positions(met):
                    rules |= multi[start]
        return rules & self.allowed[found >> self.pred_shift]


def _booleans_hold(rule: CompiledRule, used: list[str], state: int) -> bool:
    return all(bool(state >> used.index(name) & 1) is value for name, value in rule.booleans)


class _Tables:
    """Per-rule pieces of a decision line, encoded once for a spec (indexed by rule index).

    List items are kept already encoded: the encoding is one-to-one, so
    dropping repeats of an encoded item drops the same items as dropping
    repeats of the raw ones (first occurrence kept, by dict insertion order).
    The ``*_mask`` fields hold a bit per rule with that effect: the last
    matched rule with one is the highest bit of the matched bits ANDed with it.
    """

    __slots__ = (
        "allow",
        "allow_mask",
        "default",
        "order",
        "order_mask",
        "per_rule",
        "prefer",
        "prefer_mask",
        "reason",
        "reason_mask",
    )

    def __init__(self, compiled: CompiledSpec) -> None:
        rules = compiled.rules

        def mask(has: Callable[[CompiledRule], object]) -> int:
            return sum(1 << r.index for r in rules if has(r))

        #: per rule: its matched_rules entry, the first forbid, elicit and after_success
        #: item (or ""), and the items after the first of each (None when there are none)
        self.per_rule: list[tuple[str, str, str, str, tuple[tuple[str, ...], ...] | None]] = []
        for rule in rules:
            lists = [
                tuple(map(_enc, items)) for items in (rule.forbid, rule.elicit, rule.after_success)
            ]
            f, e, a = (items[0] if items else "" for items in lists)
            more = tuple(items[1:] for items in lists)
            entry = compiled.entries[rule.index].json
            self.per_rule.append((entry, f, e, a, more if any(more) else None))
        self.allow = [r.allow for r in rules]
        self.allow_mask = mask(lambda r: r.allow)
        self.reason = [_enc(r.reason) if r.reason else "null" for r in rules]
        self.reason_mask = mask(lambda r: r.reason)
        #: (route json, selection json) of a rule's prefer
        self.prefer = [
            (_enc(r.prefer), _selection(r.prefer, BASIS_RULE_PREFER, r.id, r.reason))
            if r.prefer is not None
            else ("", "")
            for r in rules
        ]
        self.prefer_mask = mask(lambda r: r.prefer is not None)
        #: (order json, route json, selection json) of a rule's route_order
        self.order = [
            (
                _list(r.route_order),
                _enc(r.route_order[0]),
                _selection(r.route_order[0], BASIS_ROUTE_ORDER, r.id, r.reason),
            )
            if r.route_order
            else ("", "", "")
            for r in rules
        ]
        self.order_mask = mask(lambda r: r.route_order)
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

    def tail(self, matched: int) -> str:
        """The line after ``"input": ...,`` for the rules whose bits are set in ``matched``."""
        # The last rule (highest bit) with a route_order, a prefer, a reason.
        last = (matched & self.order_mask).bit_length()
        order = self.order[last - 1] if last else self.default
        last = (matched & self.prefer_mask).bit_length()
        route, selection = self.prefer[last - 1] if last else order[1:]
        last = (matched & self.reason_mask).bit_length()
        reason = self.reason[last - 1] if last else "null"
        allow = "{}"
        if matched & self.allow_mask:
            merged: dict[str, Any] = {}
            for i in bit_positions(matched & self.allow_mask):
                merged.update(self.allow[i])
            allow = allow_json({k: merged[k] for k in sorted(merged)})
        # Every matched rule, lowest bit first, in one loop: this is most of the work.
        forbid: dict[str, None] = {}
        elicit: dict[str, None] = {}
        after: dict[str, None] = {}
        entries: list[str] = []
        per_rule = self.per_rule
        rest = matched
        while rest:
            low = rest & -rest
            rest ^= low
            entry, f, e, a, more = per_rule[low.bit_length() - 1]
            entries.append(entry)
            if f:
                forbid[f] = None
            if e:
                elicit[e] = None
            if a:
                after[a] = None
            if more:
                forbid.update(dict.fromkeys(more[0]))
                elicit.update(dict.fromkeys(more[1]))
                after.update(dict.fromkeys(more[2]))
        return (
            f'"route": {route}, "route_selection": {selection}, "route_order": {order[0]}, '
            f'"forbid": [{", ".join(forbid)}], "allow": {allow}, '
            f'"elicit": [{", ".join(elicit)}], "after_success": [{", ".join(after)}], '
            f'"matched_rules": [{", ".join(entries)}], "reason": {reason}}}'
        )


class BatchDecider:
    """Decision lines for inputs of one spec, remembering lines and tails already built.

    Remembering costs too (a kilobyte kept per line): past the first
    :data:`WARM` entries, a memo takes new ones only while at least one
    lookup in :data:`KEEP_RATIO` has found something, so a batch of distinct
    inputs stops paying for it and a repetitive one keeps the benefit.
    """

    def __init__(self, compiled: CompiledSpec) -> None:
        self.compiled = compiled
        self.masks = _Masks(compiled)
        self.tables = _Tables(compiled)
        self.lines: dict[str, str] = {}
        self.tails: dict[int, str] = {}
        self.line_hits = self.tail_hits = 0
        self._room = MEMO_CHARS

    def line(self, text: str) -> str:
        """``decision_json_line(decide(compiled, text))``."""
        found = self.lines.get(text)
        if found is not None:
            self.line_hits += 1
            return found
        matched = self.masks.matched(text)
        tail = self.tails.get(matched)
        if tail is not None:
            self.tail_hits += 1
        else:
            tail = self.tables.tail(matched)
            stored = len(self.tails)  # worth keeping? (inline: this runs per input)
            if self._room > 0 and (stored < WARM or self.tail_hits * KEEP_RATIO >= stored):
                self.tails[matched] = tail
                self._room -= len(tail)
        line = f'{{"input": {_enc(text)}, {tail}'
        stored = len(self.lines)
        if self._room > 0 and (stored < WARM or self.line_hits * KEEP_RATIO >= stored):
            self.lines[text] = line
            self._room -= len(line)
        return line

    def lines_for(self, texts: Iterable[str]) -> Iterator[str]:
        line = self.line
        return (line(t) for t in texts)
