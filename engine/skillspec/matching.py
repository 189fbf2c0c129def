"""Phrase matching and the standard boolean predicates, as the reference does them.

The reference lower-cases the input and each phrase, trims the phrase, and
accepts an occurrence only when the character before and the character after
it are not ASCII letters, ASCII digits or ``_`` (so hyphens, punctuation and
non-ASCII letters do not break a match). A phrase that does not end in ``s``
also matches its simple plural (phrase + ``s``). Its search walks occurrences
left to right and, after rejecting one, resumes *after* it; for phrases that
can overlap themselves that skips some occurrences, and we reproduce it.

Deciding has to be fast (tens of thousands of inputs a second on a 200-rule
spec), so phrases are precompiled into a :class:`PhraseIndex`: the input is
split once into identifier runs and every phrase that starts and ends with an
identifier character is found by dictionary lookups over run spans. Phrases
for which that shortcut would not be exact fall back to the literal search.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from engine.record import Record

_IDENT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RUN = re.compile(r"[A-Za-z0-9_]+")
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
    return (start == 0 or text[start - 1] not in _IDENT) and (
        end >= len(text) or text[end] not in _IDENT
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


def _has_border(s: str) -> bool:
    """True when a proper prefix equals a suffix, i.e. occurrences can overlap.

    A suffix ``s[i:]`` can equal a prefix only where ``s[i]`` is ``s[0]``, so
    only those starts are compared (in C), not every length.
    """
    if not s:
        return False
    first = s[0]
    i = s.find(first, 1)
    while i != -1:
        if s.startswith(s[i:]):
            return True
        i = s.find(first, i + 1)
    return False


class PhraseHit(Record):
    """Which spelling of a phrase was found: the phrase itself or its plural."""

    __slots__ = ("found", "phrase")
    __match_args__ = ("phrase", "found")

    def __init__(self, phrase: str, found: str) -> None:
        self.phrase: Final = phrase
        self.found: Final = found


class PhraseIndex:
    """Every distinct normalized phrase of a spec, searchable in one pass per input.

    ``find(text)`` returns the ids of phrases present in ``text`` (already
    normalized); ids are positions in ``phrases``. The result equals calling
    :func:`contains_phrase` for each phrase, which tests check with random input.
    """

    __slots__ = ("_first", "_ids", "_multi", "_slow", "_word", "phrases")

    def __init__(self, phrases: Iterable[str]) -> None:
        self.phrases: list[str] = []
        self._ids: dict[str, int] = {}
        self._word: dict[str, list[int]] = {}
        self._first: dict[str, set[int]] = {}
        self._multi: dict[tuple[str, ...], list[tuple[str, int]]] = {}
        self._slow: list[tuple[str, int]] = []
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
        spellings = [phrase]
        plural = plural_of(phrase)
        if plural is not None:
            spellings.append(plural)
        for spelling in spellings:
            runs = _RUN.findall(spelling)
            fast = spelling[0] in _IDENT and spelling[-1] in _IDENT and not _has_border(spelling)
            if fast:
                if len(runs) == 1:
                    self._word.setdefault(spelling, []).append(pid)
                else:
                    self._multi.setdefault(tuple(runs), []).append((spelling, pid))
                    self._first.setdefault(runs[0], set()).add(len(runs))
            else:
                self._slow.append((spelling, pid))
        return pid

    def id_of(self, phrase: str) -> int:
        return self._ids.get(phrase, -1)

    def find(self, text: str) -> set[int]:
        found: set[int] = set()
        first = self._first
        word = self._word
        if word or first:
            # A bounded occurrence of a spelling that starts and ends with identifier
            # characters covers whole identifier runs of the input, so its runs equal
            # a window of the input's runs; the literal check then settles separators.
            tokens = _RUN.findall(text)
            multi = self._multi
            count = len(tokens)
            for i, token in enumerate(tokens):
                ids = word.get(token)
                if ids is not None:
                    found.update(ids)
                sizes = first.get(token)
                if sizes is None:
                    continue
                for size in sizes:
                    if i + size <= count:
                        spellings = multi.get(tuple(tokens[i : i + size]))
                        if spellings is not None:
                            for spelling, pid in spellings:
                                if pid not in found and bounded_contains(text, spelling):
                                    found.add(pid)
        for spelling, pid in self._slow:
            if pid not in found and spelling in text and bounded_contains(text, spelling):
                found.add(pid)
        return found


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
