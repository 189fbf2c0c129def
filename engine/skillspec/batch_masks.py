"""Which rules an input matches, for batch decide: one integer with a byte per rule.

Why bytes, not bits: :mod:`engine.skillspec.batch_tables` turns the matched
rules of a whole chunk of inputs into their decision lines with a few C
calls, starting from those integers' bytes with the zero ones deleted,
which are the matched rules' numbers in file order. Why one loop over the
runs of a whole chunk: matching is most of the time per input, and a C call
per input (a split, a set) costs more than it saves.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.skillspec.decide import CompiledRule, CompiledSpec
from engine.skillspec.matching import (
    BOOLEAN_PREDICATES,
    IDENT_CHARS,
    AllOf,
    bit_positions,
    bounded_contains,
)

#: Up to this many rules, rule ``i``'s byte holds its number ``i + 1``; above, only a flag.
NAMED_RULES = 254
#: The run that ends each text's runs (:func:`engine.skillspec.batch.prepared` puts it there).
END_RUN = b"\x7f"


def lanes_of(rules: int) -> list[int]:
    """The rule indices whose bytes are set in ``rules``, in file order."""
    out = []
    while rules:
        lane = ((rules & -rules).bit_length() - 1) >> 3
        rules &= ~(255 << (8 * lane))
        out.append(lane)
    return out


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
        "group_shift",
        "groups",
        "matcher",
        "multi",
        "place",
        "pred_shift",
        "words",
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
        #: per combination of predicate bits, the rules whose booleans hold in it
        plain = sum(place[r.index] for r in rules if not r.booleans)
        checked = [r for r in rules if r.booleans]
        self.allowed = [
            plain + sum(place[r.index] for r in checked if _booleans_hold(r, used, state))
            for state in range(1 << len(used))
        ]
        self.matcher = compiled.index.matcher(payload)
        #: the matcher's runs and what each gives, and -1 for the run ending a text's runs
        self.words = {**self.matcher.words, END_RUN: -1}

    def rules_of(self, texts: Sequence[str], runs: bytes) -> list[int]:
        """Each text's matched rule bytes; ``runs``: their runs, each text's followed by END_RUN.

        :meth:`~engine.skillspec.matching.PhraseMatcher.scan` (its gated
        spellings' check too) and :meth:`AllOf.met` for the groups, inline,
        over the runs of all the texts at once: this loop is most of the time
        per input. Only the runs that give something reach Python (a dict
        lookup and a filter drop the others in C), and what is left per input
        is a few operations on integers: once the gate bits are gone, the
        group and predicate bits are read from the found bits shifted down (a
        small integer), and the predicates' allowed rules, which have no bit
        above the rule bytes, are ANDed with the found bits once.
        """
        matcher = self.matcher
        top, gate_shift, gate_pairs = matcher.mask, matcher.shift, matcher.gates
        gated_at = matcher.at
        groups = self.groups
        fill, steps, starts = groups.fill, groups.shifts, groups.starts
        always, group_shift = self.always, self.group_shift
        # above the rule bytes, once any gate bits are gone: the group bits, then the
        # predicate bits; shifted down, a small integer (an AND of the whole would not be)
        group_bits = (1 << (self.pred_shift - group_shift)) - 1
        pred_at = self.pred_shift - group_shift
        allowed = self.allowed
        literal, literal_in = matcher.literal, matcher.literal_in
        each = iter(texts)
        out: list[int] = []
        append = out.append
        found = 0
        # most runs give nothing: they are dropped in C, and only the others reach Python
        for payload in filter(None, map(self.words.get, runs.split())):
            if payload > 0:
                found |= payload
                continue
            text = next(each)  # the end of this text's runs
            if found > top:  # some gated spelling's first or last run is there
                gates = found >> gate_shift
                found &= top
                met = gates & gates >> gate_pairs  # ... and of some, both (see PhraseMatcher)
                if met:  # PhraseMatcher.gated_in, inline
                    low = text.lower()
                    while met:  # (in any order: the payloads are ORed)
                        top_bit = met.bit_length()
                        met ^= 1 << top_bit - 1
                        spelling, gives = gated_at[top_bit]
                        at = low.find(spelling)
                        if at < 0:
                            continue
                        end = at + len(spelling)  # its first occurrence bounded, or a later one
                        if (
                            (at == 0 or low[at - 1] not in IDENT_CHARS)
                            and (end == len(low) or low[end] not in IDENT_CHARS)
                        ) or bounded_contains(low, spelling):
                            found |= gives
            if literal:
                found |= literal_in(text.lower())
            high = found >> group_shift
            allow = allowed[high >> pred_at]  # (it has no bits above the rule bytes)
            rules = found & allow
            if always:
                rules |= always & allow
            if high & group_bits:  # (an AllOf start bit ANDs only the bits of its block)
                met = high | fill
                for step in steps:
                    met &= met >> step
                met &= starts
                if met:
                    rules |= self._multi(met) & allow
            append(rules)
            found = 0
        return out

    def _multi(self, met: int) -> int:
        """The bytes of the rules of several groups whose every group is met (AllOf starts)."""
        rules = 0
        for start in bit_positions(met):
            rules |= self.multi[start]
        return rules
