"""Phrase matching and the standard boolean predicates, as the reference does them.

The reference lower-cases the input and each phrase, trims the phrase, and
accepts an occurrence only when the character before and the character after
it are not ASCII letters, ASCII digits or ``_`` (so hyphens, punctuation and
non-ASCII letters do not break a match). A phrase that does not end in ``s``
also matches its simple plural (phrase + ``s``). Its search walks occurrences
left to right and, after rejecting one, resumes *after* it; for phrases that
can overlap themselves that skips some occurrences, and we reproduce it.

Deciding has to be fast (tens of thousands of inputs a second on a 200-rule
spec), so phrases are precompiled into a :class:`PhraseMatcher`: the input is
split once into identifier runs, a phrase made of one run is a set lookup, and
the literal search runs only for a phrase whose runs are all present (see the
class for why that is exact).
"""

from __future__ import annotations

from engine.record import Record

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Sequence
    from typing import Final

#: The characters of an identifier run; a phrase is bounded by any other (or the text's end).
IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# Rust's char::is_whitespace (Unicode White_Space), which str.trim() strips.
_RUST_WS = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

BOOLEAN_PREDICATES: tuple[str, ...] = (
    "task_recurrence_likely",
    "domain_object_task",
    "interactive_prompt_likely",
    "command_likely_long_running",
)

# The keyword lists the reference uses to estimate each boolean predicate.
PREDICATE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "task_recurrence_likely": (
        "daily",
        "weekly",
        "monthly",
        "every morning",
        "every day",
        "every week",
        "every month",
        "again",
        "recurring",
    ),
    "domain_object_task": (
        "alert",
        "ticket",
        "issue",
        "calendar",
        "email",
        "crm",
        "repo",
        "pull request",
        "dashboard",
        "invoice",
        "customer",
        "incident",
    ),
    "command_likely_long_running": (
        "test",
        "build",
        "release",
        "deploy",
        "server",
        "watch",
        "tail",
        "monitor",
        "background process",
        "tracked background",
        "in the background",
    ),
    "interactive_prompt_likely": ("login", "auth", "mfa", "otp", "password", "prompt"),
}


def normalize_input(text: str) -> str:
    """The form of the input every phrase is searched in (lower-cased, not trimmed)."""
    return text.lower()


def normalize_phrase(phrase: str) -> str:
    """Lower-case then trim, as the reference does; '' means "never matches"."""
    return phrase.lower().strip(_RUST_WS)


def _bounded_at(text: str, start: int, end: int) -> bool:
    return (start == 0 or text[start - 1] not in IDENT_CHARS) and (
        end >= len(text) or text[end] not in IDENT_CHARS
    )


def bounded_contains(text: str, needle: str) -> bool:
    """The reference's left-to-right search: resume after a rejected occurrence."""
    pos = text.find(needle)
    size = len(needle)
    while pos >= 0:
        end = pos + size
        if _bounded_at(text, pos, end):
            return True
        if end >= len(text):
            return False
        pos = text.find(needle, end)
    return False


def plural_of(phrase: str) -> str | None:
    """The reference's simple plural: phrase + 's' unless it already ends in 's'."""
    return None if phrase.endswith("s") else phrase + "s"


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether normalized ``text`` contains ``phrase`` (raw) on word boundaries."""
    norm = normalize_phrase(phrase)
    if not norm:
        return False
    if bounded_contains(text, norm):
        return True
    plural = plural_of(norm)
    return plural is not None and bounded_contains(text, plural)


#: Byte table for :func:`runs_of`: identifier bytes stay, every other byte becomes a space.
RUN_BYTES = bytes(c if chr(c) in IDENT_CHARS else 32 for c in range(256))


def runs_of(text: str) -> list[bytes]:
    """The identifier runs of ``text`` (``[A-Za-z0-9_]+``), as ASCII bytes, in order.

    The same runs as the regex finds, in C: identifier characters are ASCII,
    and every other character's UTF-8 bytes are at or above 0x80 (lone
    surrogates included, through ``surrogatepass``), so they separate runs.
    """
    return text.encode("utf-8", "surrogatepass").translate(RUN_BYTES).split()


def bit_positions(mask: int) -> list[int]:
    """Positions of the set bits of ``mask`` (>= 0), lowest first."""
    out = []
    while mask:
        low = mask & -mask
        mask ^= low
        out.append(low.bit_length() - 1)
    return out


class PhraseHit(Record):
    """Which spelling of a phrase was found: the phrase itself or its plural."""

    __slots__ = ("found", "phrase")
    __match_args__ = ("phrase", "found")

    def __init__(self, phrase: str, found: str) -> None:
        self.phrase: Final = phrase
        self.found: Final = found


class AllOf:
    """Which of many "all of these" requirements a set of present sources meets, in a few shifts.

    Why: a rule needs every one of its phrase groups, a phrase of several
    words needs every one of its words; checking each requirement in Python
    per input costs more than the rest of deciding. Here each requirement
    owns a block of ``width`` bits (one per source it needs, the rest always
    set); a caller ORs together ``bits[source]`` for each present source,
    and :meth:`met` ANDs each block down to its first bit.
    """

    __slots__ = ("bits", "fill", "owner", "shifts", "starts", "width")

    def __init__(self, requirements: Sequence[Iterable[Hashable]]) -> None:
        needs = [list(dict.fromkeys(r)) for r in requirements]
        self.width = width = max(map(len, needs), default=1) or 1
        self.bits: dict[Hashable, int] = {}
        self.fill = self.starts = 0
        #: block start bit -> requirement index
        self.owner: dict[int, int] = {}
        for n, need in enumerate(needs):
            base = n * width
            self.owner[base] = n
            self.starts |= 1 << base
            for k, source in enumerate(need):
                self.bits[source] = self.bits.get(source, 0) | 1 << (base + k)
            self.fill |= ((1 << width) - 1) >> len(need) << (base + len(need))
        # AND a block's bits together: doubling spans, then one shift to cover the rest
        shifts: list[int] = []
        span = 1
        while span * 2 <= width:
            shifts.append(span)
            span *= 2
        if span < width:
            shifts.append(width - span)
        self.shifts = tuple(shifts)

    def met(self, present: int) -> int:
        """The start bits of the blocks ``present`` (an OR of ``bits`` values) fills."""
        x = present | self.fill
        for shift in self.shifts:
            x &= x >> shift
        return x & self.starts

    def indices(self, met: int) -> list[int]:
        """The requirement indices of a :meth:`met` result, in order."""
        return list(map(self.owner.__getitem__, bit_positions(met)))


class PhraseMatcher:
    """ORs together a number (a payload) for every phrase present in a text.

    Why: deciding asks, per input, which of a few hundred phrases occur; a
    payload per phrase (a bit per rule, group or predicate it feeds) lets the
    caller get everything it needs from one integer. The text is split once
    into identifier runs (:func:`runs_of`) and three facts keep it exact:

    - A spelling made only of identifier characters occurs on word boundaries
      exactly when it equals a run of the text. (The reference's resume-after-
      a-rejected-occurrence rule cannot hide such an occurrence: a rejected one
      overlapping it would put an identifier character just before it.)
    - In any bounded occurrence of another spelling, each of its identifier
      runs is a whole run of the text; so the literal search
      (:func:`bounded_contains`, the reference itself) runs only when its
      first and last runs are both present, and settles the rest: the runs
      between, separators and overlaps. Above the payload bits (``shift``),
      gated spelling ``n`` has two bits, ``n`` for its last run and
      ``gates + n`` for its first, so that the spellings whose both runs are
      present are one AND of those bits with themselves shifted down
      (three operations on one integer per input; an :class:`AllOf` of two
      took five).
    - A spelling without identifier characters is searched literally.
    """

    __slots__ = ("at", "gated", "gates", "keys", "literal", "mask", "shift", "words")

    def __init__(self, spellings: Iterable[tuple[str, int]]) -> None:
        words: dict[bytes, int] = {}
        gated: list[tuple[str, int]] = []
        ends: list[tuple[bytes, bytes]] = []
        self.literal: list[tuple[str, int]] = []
        for spelling, payload in spellings:
            runs = runs_of(spelling)
            if not runs:
                self.literal.append((spelling, payload))
            elif len(runs) == 1 and len(runs[0]) == len(spelling):
                words[runs[0]] = words.get(runs[0], 0) | payload
            else:
                gated.append((spelling, payload))
                ends.append((runs[0], runs[-1]))
        widest = max((p for _, p in gated), default=0) | max(words.values(), default=0)
        self.shift = shift = widest.bit_length()
        #: the payload bits of a scan's OR (above them: the runs gated spellings need)
        self.mask = (1 << shift) - 1
        #: how many gated spellings: the distance between a spelling's two gate bits
        self.gates = gates = len(gated)
        for n, (first, last) in enumerate(ends):
            words[first] = words.get(first, 0) | 1 << (shift + gates + n)
            words[last] = words.get(last, 0) | 1 << (shift + n)
        self.gated = gated
        #: by the bit_length() of a met gate bit: its gated spelling and payload
        self.at: list[tuple[str, int]] = [("", 0), *gated]
        #: every run that matters, with what it gives on its own and the gates it opens
        self.words = words
        self.keys = frozenset(words)

    def scan(self, text: str) -> int:
        """The OR of the payloads of every spelling present in normalized ``text``."""
        words = self.words
        found = 0
        for run in self.keys.intersection(runs_of(text)):
            found |= words[run]
        gates = found >> self.shift
        if gates:
            found &= self.mask
            met = gates & gates >> self.gates  # (the first runs' bits shifted onto the last's)
            if met:
                found |= self.gated_in(met, text)
        if self.literal:
            found |= self.literal_in(text)
        return found

    def gated_in(self, met: int, text: str) -> int:
        """The payloads of the gated spellings found in ``text`` among those ``met`` opens.

        ``met``: a bit per spelling whose first and last runs are present (see the class).
        """
        at = self.at
        found = 0
        while met:
            start = met & -met
            met ^= start
            spelling, payload = at[start.bit_length()]
            if bounded_contains(text, spelling):
                found |= payload
        return found

    def literal_in(self, text: str) -> int:
        """The payloads of the spellings without identifier characters that occur in ``text``."""
        found = 0
        for spelling, payload in self.literal:
            if spelling in text and bounded_contains(text, spelling):
                found |= payload
        return found


class PhraseIndex:
    """Every distinct normalized phrase of a spec, each with an id (its position in ``phrases``).

    ``find(text)`` returns the ids of phrases present in ``text`` (already
    normalized), through a :class:`PhraseMatcher` whose payload is one bit
    per phrase; the result equals calling :func:`contains_phrase` for each
    phrase, which tests check with random input. ``matcher(payloads)`` builds
    one with the caller's payloads.
    """

    __slots__ = ("_ids", "_own", "phrases")

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases: list[str] = []
        self._ids: dict[str, int] = {}
        self._own: PhraseMatcher | None = None
        for phrase in phrases:
            self.add(phrase)

    def add(self, phrase: str) -> int:
        """Register a normalized phrase; returns its id (-1 for an empty phrase)."""
        if not phrase:
            return -1
        known = self._ids.get(phrase)
        if known is not None:
            return known
        pid = len(self.phrases)
        self.phrases.append(phrase)
        self._ids[phrase] = pid
        self._own = None
        return pid

    def id_of(self, phrase: str) -> int:
        return self._ids.get(phrase, -1)

    def matcher(self, payloads: Sequence[int]) -> PhraseMatcher:
        """A matcher giving ``payloads[id]`` for each phrase found (its plural included)."""
        spellings = []
        for phrase, payload in zip(self.phrases, payloads, strict=True):
            if payload:
                spellings.append((phrase, payload))
                plural = plural_of(phrase)
                if plural is not None:
                    spellings.append((plural, payload))
        return PhraseMatcher(spellings)

    def find(self, text: str) -> set[int]:
        own = self._own
        if own is None:
            own = self._own = self.matcher([1 << pid for pid in range(len(self.phrases))])
        return set(bit_positions(own.scan(text)))


def first_hit(text: str, phrases: Sequence[str]) -> PhraseHit | None:
    """The first phrase (in list order) present in ``text``, and which spelling matched."""
    for phrase in phrases:
        norm = normalize_phrase(phrase)
        if not norm:
            continue
        if bounded_contains(text, norm):
            return PhraseHit(phrase, norm)
        plural = plural_of(norm)
        if plural is not None and bounded_contains(text, plural):
            return PhraseHit(phrase, plural)
    return None


_PREDICATE_INDEX: dict[str, PhraseIndex] = {
    name: PhraseIndex(words) for name, words in PREDICATE_KEYWORDS.items()
}


def predicate_value(name: str, text: str) -> bool:
    """The reference's estimate of a standard boolean predicate for normalized ``text``."""
    return bool(_PREDICATE_INDEX[name].find(text))


def predicate_evidence(name: str, text: str) -> PhraseHit | None:
    """The keyword that made a boolean predicate true, for explanations."""
    return first_hit(text, PREDICATE_KEYWORDS[name])
