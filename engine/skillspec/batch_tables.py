"""Decision lines for a whole chunk of inputs at once, from per-rule pieces encoded once.

Why whole chunks: a decision line is about a kilobyte for an input of a few
words, and building it one Python step per matched rule, or even one C call
per field per input, costs several times a JSON echo of the input (a call
into C costs hundreds of instructions before it does anything). So
:class:`Tables` takes the matched rules of every input of a chunk (from
:class:`~engine.skillspec.batch_masks.Masks`: an integer with a byte per
rule) and makes their lines with a few C calls per chunk: the bytes of all
of them, zero bytes deleted, are the matched rules' numbers in file order
(:data:`SEP` between two inputs); one ``operator.itemgetter`` of those
numbers picks each matched rule's encoded entry for every input at once,
and ``join`` then ``split`` at the separator's piece give one text per
input. The lists whose items repeat across rules (forbid, elicit,
after_success) go the same way as one byte per item (:class:`Field`),
keeping each item's first occurrence in its input.

Specs of more than :data:`~engine.skillspec.batch_masks.NAMED_RULES` rules,
or a list field of more than 254 distinct items, take the same tables one
rule at a time.
"""

from __future__ import annotations

import re
from _json import encode_basestring as _enc  # json's C string encoder (no ASCII escaping)
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import itemgetter

from engine.skillspec.batch_masks import NAMED_RULES, lanes_of
from engine.skillspec.decide import (
    BASIS_DEFAULT,
    BASIS_ROUTE_ORDER,
    BASIS_RULE_PREFER,
    DEFAULT_REASON,
    CompiledRule,
    CompiledSpec,
    allow_json,
)

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

#: The number that separates two inputs' rule (or item) numbers: never a rule's or an item's.
SEP = 255
#: The piece a separator picks: characters JSON text never holds unescaped. Eight of them,
#: not one: ``str.split`` looks for one character a character at a time, for eight it
#: skips ahead (the entries of a chunk, cut per input, are half of its lines).
CUT = "\x00\x01\x02\x03\x04\x05\x06\x07"
#: Where an input's last piece ends: its ", " and the separator.
_LAST = ", " + CUT
#: An input without numbers, and the same given a 0 (see :func:`cut`).
_EMPTY, _FILLED = bytes([SEP, SEP]), bytes([SEP, 0, SEP])
#: The separator as bytes, between two inputs' rule (or item) numbers.
_SEP = bytes([SEP])
#: In the reversed item bytes of many inputs, an item that occurs again later (earlier in
#: the input) before the input ends: every repeat of an item but its first occurrence.
_REPEAT = re.compile(rb"([^\xff])(?=[^\xff]*?\1)")
#: Past this many items per input, a dict per input drops repeats faster than the
#: expression, whose cost grows with the square of an input's items.
DICT_ITEMS = 8


def cut(numbers: bytes, pieces: Sequence[str], count: int) -> list[str]:
    """The texts of the first ``count`` inputs, from their numbers (:data:`SEP` after each's).

    ``pieces`` by number: each one's text followed by ``", "``, :data:`CUT`
    at :data:`SEP`, and ``", "`` alone at 0. The chunk's text is cut where
    a ``", "`` meets :data:`CUT`, so that each input's last ``", "`` goes
    (slicing each input's text instead cost a copy of it, copied again into
    its line); an input without numbers first gets a 0, whose piece gives
    it that ``", "``. ``numbers`` ends with two separators (so there are
    two numbers at least, and ``itemgetter`` gives a tuple).
    """
    numbers = numbers.replace(_EMPTY, _FILLED).replace(_EMPTY, _FILLED)  # (runs of them)
    if numbers[0] == SEP:
        numbers = b"\0" + numbers
    return "".join(itemgetter(*numbers)(pieces)).split(_LAST, count)[:count]


def _opt(value: str | None) -> str:
    return "null" if value is None else _enc(value)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(map(_enc, values)) + "]"


def _selection(route: str, basis: str, rule_id: str | None, reason: str | None) -> str:
    return (
        f'{{"route": {_enc(route)}, "basis": {_enc(basis)}, '
        f'"rule_id": {_opt(rule_id)}, "reason": {_opt(reason)}}}'
    )


class Field:
    """One list field (forbid, elicit or after_success): its items, encoded once, as bytes.

    Items are kept encoded: the encoding is one-to-one, so dropping repeats
    of an encoded item drops the same items as dropping repeats of the raw
    ones. Each distinct item has a number (1 to 254); ``codes`` gives each
    rule number the bytes of its items' numbers (a ``bytes.translate``
    table when no rule has more than one, else a list), ``items`` each item
    number its encoding, ``pieces`` the same followed by ``", "`` (as
    :func:`cut` takes them).
    Where an item can occur in two rules, its repeats in an input are
    dropped by a dict per input when inputs hold many items (that costs per
    item), else by :data:`_REPEAT` over the whole chunk (that costs per pair
    of items in an input). When every rule that has items has the same ones,
    the field's text is ``same`` or empty. ``per_rule`` (by rule number)
    serves the one rule at a time way. A text is its items joined by ``", "``.
    """

    __slots__ = ("codes", "items", "mask", "per_rule", "pieces", "repeats", "same", "way")

    def __init__(self, lists: Sequence[tuple[str, ...]], place: Sequence[int]) -> None:
        encoded = [tuple(dict.fromkeys(map(_enc, items))) for items in lists]
        self.per_rule: list[tuple[str, ...]] = [(), *encoded]
        self.mask = sum(p for p, items in zip(place, encoded, strict=True) if items)
        owned = [items for items in encoded if items]
        distinct = list(dict.fromkeys(chain.from_iterable(owned)))
        #: whether an item can occur in two rules (else no repeat is ever dropped)
        self.repeats = len(distinct) < sum(map(len, owned))
        self.same = ", ".join(owned[0]) if owned else ""
        number = {item: k for k, item in enumerate(distinct, 1)}
        self.items = [""] * 256
        self.pieces = [", ", *[""] * 255]
        self.codes: bytes | list[bytes] = b""
        if not owned or len(set(owned)) == 1:
            self.way = "same"
        elif len(distinct) >= SEP or len(lists) > NAMED_RULES:
            self.way = "one by one"  # too many items (or rules) to number in a byte
        else:
            self.way = "bulk"
            for item, k in number.items():
                self.items[k] = item
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

    def texts(self, matched: list[int], numbers: bytes) -> list[str]:
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
            items = b"".join(itemgetter(*numbers)(codes))  # (two numbers at least: a tuple)
        if self.repeats and len(items) > DICT_ITEMS * len(matched):
            # a dict per input keeps each item's first occurrence, in order
            firsts = map(dict.fromkeys, items.split(_SEP, len(matched))[: len(matched)])
            return list(map(", ".join, map(map, repeat(self.items.__getitem__), firsts)))
        if self.repeats:
            items = _REPEAT.sub(b"", items[::-1])[::-1]
        return cut(items, self.pieces, len(matched))

    def text_of(self, indices: Iterable[int]) -> str:
        """The field's text for the matched rules at ``indices``, one step per rule."""
        per_rule = self.per_rule
        return ", ".join(dict.fromkeys(chain.from_iterable(per_rule[i + 1] for i in indices)))


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

        #: by rule number: the rule's matched_rules entry followed by ", " (as cut takes them)
        self.entries = [", ", *(compiled.entries[r.index].json + ", " for r in rules)]
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
            entries = [", ".join(self.entries[i + 1][:-2] for i in ls) for ls in lanes]
            return (entries, *([f.text_of(ls) for ls in lanes] for f in self.fields))
        width, little = repeat(self.width), repeat("little")
        numbers = _SEP.join(map(int.to_bytes, matched, width, little))  # type: ignore[arg-type]
        numbers = numbers.translate(None, b"\0") + _EMPTY
        entries = cut(numbers, self.entries, len(matched))
        return (entries, *(f.texts(matched, numbers) for f in self.fields))

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
                f'"route_order": {orders}, "forbid": [{forbid}], "allow": {allow}, '
                f'"elicit": [{elicit}], "after_success": [{after}], '
                f'"matched_rules": [{entry}], '
                f'"reason": {reason[(rules & reason_mask).bit_length()]}}}'
            )
        return out

    def _allow(self, rules: int) -> str:
        """The merged ``allow`` of the matched rules (later keys win), keys sorted."""
        merged: dict[str, Any] = {}
        for i in lanes_of(rules):
            merged.update(self.allow[i])
        return allow_json({k: merged[k] for k in sorted(merged)})
