"""The tables batch decide runs on: which rules an input matches, and the text they give.

Why tables and whole chunks: a decision line is about a kilobyte for an
input of a few words, and deciding it one Python step per rule, or even one
C call per field per input, costs several times a JSON echo of the input
(each call into C costs hundreds of instructions before it does anything).
So :class:`Masks` reads an input in one short loop into one integer with a
byte per rule, and :class:`Tables` turns the integers of a whole chunk of
inputs into their lines' tails with a few C calls per chunk: the bytes of
all of them, zero bytes deleted, are the matched rules' numbers in file
order (255 between two inputs); one ``operator.itemgetter`` of those
numbers picks each rule's encoded piece of a field for every input at
once; ``join``, ``replace`` and ``split`` cut the result back into one
string per input. Lists whose items repeat across rules (forbid, elicit,
after_success) keep each item's first occurrence: as one byte per item,
a regular expression deletes, in all inputs at once, every item that
occurred earlier in its input.

Specs of more than :data:`NAMED_RULES` rules, or a list field of more than
254 distinct items, take the same tables one rule at a time.
"""

from __future__ import annotations

import re
from _json import encode_basestring as _enc  # json's C string encoder (no ASCII escaping)
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import itemgetter

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

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

#: Up to this many rules, rule ``i``'s byte holds its number ``i + 1``; above, only a flag.
NAMED_RULES = 254
#: The number that separates two inputs' rule numbers (never a rule's).
SEP = 255
#: The piece a separator picks: a character JSON text never holds unescaped.
CUT = "\x00"
#: The separator as bytes, between two inputs' rule (or item) numbers.
_SEP = bytes([SEP])
#: In the reversed item bytes of many inputs, an item that occurs again later (earlier in
#: the input) before the input ends: every repeat of an item but its first occurrence.
_REPEAT = re.compile(rb"([^\xff])(?=[^\xff]*?\1)")
#: Past this many items per input, a dict per input drops repeats faster than the
#: expression, whose cost grows with the square of an input's items.
DICT_ITEMS = 8


def lanes_of(rules: int) -> list[int]:
    """The rule indices whose bytes are set in ``rules``, in file order."""
    out = []
    while rules:
        lane = ((rules & -rules).bit_length() - 1) >> 3
        rules &= ~(255 << (8 * lane))
        out.append(lane)
    return out


def cut(pieces: Iterable[str], count: int) -> list[str]:
    """Pieces with :data:`CUT` after each input's, as the texts of the first ``count`` inputs."""
    return "".join(pieces).split(CUT, count)[:count]


def _opt(value: str | None) -> str:
    return "null" if value is None else _enc(value)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_enc, values)) + "]"


def _selection(route: str, basis: str, rule_id: str | None, reason: str | None) -> str:
    return (
        f'{{"route": {_enc(route)}, "basis": {_enc(basis)}, '
        f'"rule_id": {_opt(rule_id)}, "reason": {_opt(reason)}}}'
    )


def _booleans_hold(rule: CompiledRule, used: list[str], state: int) -> bool:
    return all(bool(state >> used.index(name) & 1) is value for name, value in rule.booleans)


class Masks:
    """A spec's rules as bytes of one integer, so which rules an input matches is a few int ops.

    Rule ``i`` owns byte ``i`` (bits ``8i`` to ``8i+7``) and sets it to
    ``i + 1`` (to 1 past :data:`NAMED_RULES` rules). The spec's
    :class:`~engine.skillspec.matching.PhraseMatcher` gives, ORed together
    over the phrases found: the byte of every rule with a single phrase group
    (``user_says_any`` alone, or one ``user_says_all_groups`` entry) that the
    phrase belongs to, an :class:`~engine.skillspec.matching.AllOf` bit
    (above the rule bytes) for every group of the rules that need several,
    and a bit per boolean predicate whose keyword occurs. Rules with only
    boolean predicates are always candidates; the predicate bits then pick,
    from a table of every combination, the rules whose booleans hold. The
    rules found equal :func:`~engine.skillspec.decide.matched_indices` (a
    property test checks).
    """

    __slots__ = (
        "allowed",
        "always",
        "group_mask",
        "group_shift",
        "groups",
        "matcher",
        "multi",
        "place",
        "pred_shift",
        "rule_mask",
    )

    def __init__(self, compiled: CompiledSpec) -> None:
        rules = compiled.rules
        count = len(rules)
        named = count <= NAMED_RULES
        #: per rule index, its byte holding its value, as an integer
        self.place = place = [(i + 1 if named else 1) << (8 * i) for i in range(count)]
        used = [n for n in BOOLEAN_PREDICATES if any(n == b for r in rules for b, _ in r.booleans)]
        payload = [0] * len(compiled.index.phrases)
        self.always = 0
        multi: list[tuple[int, list[frozenset[int]]]] = []
        for rule in rules:
            need = ([rule.any_ids] if rule.any_phrases else []) + list(rule.group_ids)
            if not rule.has_condition or not all(need):
                continue  # never matches: no condition, or a group of empty phrases only
            if not need:
                self.always |= place[rule.index]
            elif len(need) == 1:
                for pid in need[0]:
                    payload[pid] |= place[rule.index]
            else:
                multi.append((rule.index, need))
        self.groups = AllOf(
            [[(n, k) for k in range(len(need))] for n, (_, need) in enumerate(multi)]
        )
        #: AllOf block start bit -> the rule byte it stands for
        self.multi = {start: place[multi[n][0]] for start, n in self.groups.owner.items()}
        self.group_shift = shift = 8 * count
        for n, (_, need) in enumerate(multi):
            for k, group in enumerate(need):
                for pid in group:
                    payload[pid] |= self.groups.bits[(n, k)] << shift
        self.pred_shift = shift = shift + len(multi) * self.groups.width
        for k, name in enumerate(used):
            for pid in compiled.bool_ids[name]:
                payload[pid] |= 1 << (shift + k)
        self.rule_mask = (1 << self.group_shift) - 1
        self.group_mask = (1 << shift) - 1 - self.rule_mask
        #: per combination of predicate bits, the rules whose booleans hold in it
        plain = sum(place[r.index] for r in rules if not r.booleans)
        checked = [r for r in rules if r.booleans]
        self.allowed = [
            plain + sum(place[r.index] for r in checked if _booleans_hold(r, used, state))
            for state in range(1 << len(used))
        ]
        self.matcher = compiled.index.matcher(payload)

    def rules_of(self, texts: Sequence[str], runs: bytes) -> list[int]:
        """Each text's matched rule bytes; ``runs``: their runs, each text's followed by ``\\x7f``.

        :meth:`~engine.skillspec.matching.PhraseMatcher.scan` and the two
        :meth:`AllOf.met` checks (the gated spellings', the groups'), inline,
        over the runs of all the texts at once: this loop is most of the time
        per input.
        """
        matcher = self.matcher
        words = {**matcher.words, b"\x7f": -1}  # -1: the end of a text's runs
        top, gate_shift = matcher.mask, matcher.shift
        need, groups = matcher.need, self.groups
        gate_fill, gate_steps, gate_starts = need.fill, need.shifts, need.starts
        fill, steps, starts = groups.fill, groups.shifts, groups.starts
        rule_mask, always, group_mask, group_shift = (
            self.rule_mask,
            self.always,
            self.group_mask,
            self.group_shift,
        )
        allowed, pred_shift = self.allowed, self.pred_shift
        literal, gated_in, literal_in = matcher.literal, matcher.gated_in, matcher.literal_in
        get = words.get
        each = iter(texts)
        out: list[int] = []
        append = out.append
        found = 0
        for run in runs.split():
            payload = get(run, 0)
            if payload > 0:
                found |= payload
                continue
            if not payload:
                continue
            text = next(each)  # the end of this text's runs
            if found > top:  # the first and last runs of a spelling with separators are there
                met = found >> gate_shift | gate_fill
                for step in gate_steps:
                    met &= met >> step
                met &= gate_starts
                found &= top
                if met:
                    found |= gated_in(met, text.lower())
            if literal:
                found |= literal_in(text.lower())
            rules = found & rule_mask | always
            if found & group_mask:  # (an AllOf start bit ANDs only the bits of its block)
                met = found >> group_shift | fill
                for step in steps:
                    met &= met >> step
                met &= starts
                if met:
                    rules |= self._multi(met)
            append(rules & allowed[found >> pred_shift])
            found = 0
        return out

    def _multi(self, met: int) -> int:
        """The bytes of the rules of several groups whose every group is met (AllOf starts)."""
        rules = 0
        for start in bit_positions(met):
            rules |= self.multi[start]
        return rules


class Field:
    """One list field (forbid, elicit or after_success): its items, encoded once, as bytes.

    Items are kept encoded: the encoding is one-to-one, so dropping repeats
    of an encoded item drops the same items as dropping repeats of the raw
    ones. Each distinct item has a number (1 to 254); ``codes`` gives each
    rule number the bytes of its items' numbers (a ``bytes.translate``
    table when no rule has more than one, else a list), ``pieces`` each item
    number its encoding followed by ``", "`` (:data:`CUT` at :data:`SEP`).
    When every rule that has items has the same ones, the field's text is
    ``same`` or empty. ``per_rule`` (by rule number) serves the one rule at a
    time way. Every text ends with ``", "`` unless empty.
    """

    __slots__ = ("codes", "mask", "per_rule", "pieces", "repeats", "same", "way")

    def __init__(self, lists: Sequence[tuple[str, ...]], place: Sequence[int]) -> None:
        encoded = [tuple(dict.fromkeys(map(_enc, items))) for items in lists]
        self.per_rule: list[tuple[str, ...]] = [(), *encoded]
        self.mask = sum(p for p, items in zip(place, encoded, strict=True) if items)
        owned = [items for items in encoded if items]
        distinct = list(dict.fromkeys(chain.from_iterable(owned)))
        #: whether an item can occur in two rules (else no repeat is ever dropped)
        self.repeats = len(distinct) < sum(map(len, owned))
        self.same = "".join(item + ", " for item in owned[0]) if owned else ""
        number = {item: k for k, item in enumerate(distinct, 1)}
        self.pieces = [""] * 256
        self.codes: bytes | list[bytes] = b""
        if not owned or len(set(owned)) == 1:
            self.way = "same"
        elif len(distinct) >= SEP or len(lists) > NAMED_RULES:
            self.way = "one by one"  # too many items (or rules) to number in a byte
        else:
            self.way = "bulk"
            for item, k in number.items():
                self.pieces[k] = item + ", "
            self.pieces[SEP] = CUT
            if all(len(items) <= 1 for items in encoded):
                table = bytearray(256)
                for n, items in enumerate(encoded, 1):
                    table[n] = number[items[0]] if items else 0
                table[SEP] = SEP
                self.codes = bytes(table)
            else:
                self.codes = [b"", *(bytes(map(number.__getitem__, items)) for items in encoded)]
                self.codes += [b""] * (SEP - len(self.codes)) + [bytes([SEP])]

    def texts(
        self, matched: list[int], numbers: bytes, pick: Callable[[Sequence[Any]], tuple[Any, ...]]
    ) -> list[str]:
        """The field's text for each of ``matched``, whose rule numbers ``numbers`` holds."""
        if self.way == "same":
            same, mask = self.same, self.mask
            return [same if rules & mask else "" for rules in matched]
        if self.way == "one by one":
            return [self.text_of(lanes_of(rules)) for rules in matched]
        codes = self.codes
        if isinstance(codes, bytes):
            items = numbers.translate(codes).translate(None, b"\0")
        else:
            items = b"".join(pick(codes))
        if self.repeats and len(items) > DICT_ITEMS * len(matched):
            # a dict per input keeps each item's first occurrence, in order
            firsts = map(dict.fromkeys, items.split(_SEP, len(matched))[: len(matched)])
            return list(map("".join, map(map, repeat(self.pieces.__getitem__), firsts)))
        if self.repeats:
            items = _REPEAT.sub(b"", items[::-1])[::-1]
        return cut(itemgetter(*items)(self.pieces), len(matched))

    def text_of(self, indices: Iterable[int]) -> str:
        """The field's text for the matched rules at ``indices``, one step per rule."""
        per_rule = self.per_rule
        items = dict.fromkeys(chain.from_iterable(per_rule[i + 1] for i in indices))
        return "".join(item + ", " for item in items)


class Tables:
    """Per-rule pieces of a decision line, encoded once for a spec.

    ``entries`` is indexed by rule number (index + 1, :data:`SEP` the
    separator); the ``by_length`` lists by the ``bit_length()`` of the
    matched rule bytes ANDed with a field's mask, which names the last
    matched rule with that effect (0: none).
    """

    __slots__ = (
        "allow",
        "allow_mask",
        "entries",
        "fields",
        "named",
        "order",
        "order_mask",
        "prefer",
        "prefer_mask",
        "reason",
        "reason_mask",
        "width",
    )

    def __init__(self, compiled: CompiledSpec, place: Sequence[int]) -> None:
        rules = compiled.rules
        self.width = len(rules)
        self.named = len(rules) <= NAMED_RULES

        def mask(has: Callable[[CompiledRule], object]) -> int:
            return sum(place[r.index] for r in rules if has(r))

        def by_length(values: list[Any], none: Any) -> list[Any]:
            """``values[i]`` for every bit_length the byte of rule ``i`` can give, ``none`` at 0."""
            return [none, *chain.from_iterable(map(repeat, values, repeat(8)))]

        #: by rule number: the rule's matched_rules entry followed by ", " (CUT at SEP)
        self.entries = ["", *(compiled.entries[r.index].json + ", " for r in rules)]
        if self.named:
            self.entries += [""] * (SEP - len(self.entries)) + [CUT]
        self.fields = tuple(
            Field([getattr(r, name) for r in rules], place)
            for name in ("forbid", "elicit", "after_success")
        )
        self.allow = [r.allow for r in rules]
        self.allow_mask = mask(lambda r: r.allow)
        self.reason = by_length([_enc(r.reason) if r.reason else "null" for r in rules], "null")
        self.reason_mask = mask(lambda r: r.reason)
        default = compiled.default_route_order
        #: (order json, route json, selection json) of the last route_order (or the default)
        self.order = by_length(
            [
                (
                    _list(r.route_order),
                    _enc(r.route_order[0]),
                    _selection(r.route_order[0], BASIS_ROUTE_ORDER, r.id, r.reason),
                )
                if r.route_order
                else None
                for r in rules
            ],
            (
                _list(default),
                _enc(default[0]),
                _selection(default[0], BASIS_DEFAULT, None, DEFAULT_REASON),
            )
            if default
            else ("[]", "null", "null"),
        )
        self.order_mask = mask(lambda r: r.route_order)
        #: (route json, selection json) of the last prefer, None for none
        self.prefer = by_length(
            [
                (_enc(r.prefer), _selection(r.prefer, BASIS_RULE_PREFER, r.id, r.reason))
                if r.prefer is not None
                else None
                for r in rules
            ],
            None,
        )
        self.prefer_mask = mask(lambda r: r.prefer is not None)

    def lists(self, matched: list[int]) -> tuple[list[str], ...]:
        """For each of ``matched`` (rule bytes): entries, forbid, elicit and after_success texts."""
        if not self.named:
            lanes = list(map(lanes_of, matched))
            entries = ["".join(self.entries[i + 1] for i in ls) for ls in lanes]
            return (entries, *([f.text_of(ls) for ls in lanes] for f in self.fields))
        width, little = repeat(self.width), repeat("little")
        numbers = _SEP.join(map(int.to_bytes, matched, width, little))  # type: ignore[arg-type]
        numbers = numbers.translate(None, b"\0") + bytes([SEP, SEP])
        pick = itemgetter(*numbers)  # two numbers at least: it gives a tuple
        entries = cut(pick(self.entries), len(matched))
        return (entries, *(f.texts(matched, numbers, pick) for f in self.fields))

    def lines(
        self,
        quoted: Iterable[str],
        matched: Iterable[int],
        entries: Iterable[str],
        forbids: Iterable[str],
        elicits: Iterable[str],
        afters: Iterable[str],
    ) -> list[str]:
        """Each decision line, from its input (encoded, unquoted), rule bytes and list texts."""
        order, order_mask = self.order, self.order_mask
        prefer, prefer_mask = self.prefer, self.prefer_mask
        reason, reason_mask, allow_mask = self.reason, self.reason_mask, self.allow_mask
        out = []
        for text, rules, entry, forbid, elicit, after in zip(
            quoted, matched, entries, forbids, elicits, afters, strict=True
        ):
            orders, route, selection = order[(rules & order_mask).bit_length()]
            preferred = prefer[(rules & prefer_mask).bit_length()]
            if preferred is not None:
                route, selection = preferred
            allow = self._allow(rules) if rules & allow_mask else "{}"
            out.append(
                f'{{"input": "{text}", "route": {route}, "route_selection": {selection}, '
                f'"route_order": {orders}, "forbid": [{forbid[:-2]}], "allow": {allow}, '
                f'"elicit": [{elicit[:-2]}], "after_success": [{after[:-2]}], '
                f'"matched_rules": [{entry[:-2]}], '
                f'"reason": {reason[(rules & reason_mask).bit_length()]}}}'
            )
        return out

    def _allow(self, rules: int) -> str:
        """The merged ``allow`` of the matched rules (later keys win), keys sorted."""
        merged: dict[str, Any] = {}
        for i in lanes_of(rules):
            merged.update(self.allow[i])
        return allow_json({k: merged[k] for k in sorted(merged)})
