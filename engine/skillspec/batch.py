"""``skillspec decide --inputs FILE --json``: many decision lines, each as one decide writes it.

Why a batch path: a decision line is about a kilobyte (the route, its order,
every forbid, the matched rules with their reasons) for an input of a few
words, and building a :class:`~engine.skillspec.decide.Decision` then
encoding it costs about twenty microseconds per input, five times a JSON echo
of the same line. Inputs are decided a chunk at a time instead:

- Everything after ``"input"`` depends only on which rules matched, so it is
  built straight from per-rule pieces encoded once per spec, never through a
  ``Decision``, and for a whole chunk at once with a few C calls (see
  :mod:`engine.skillspec.batch_tables`).
- Which rules matched is read for the whole chunk in one loop over its
  identifier runs (see :mod:`engine.skillspec.batch_masks`); lower-casing,
  finding the runs and JSON-encoding the inputs are done on the whole
  chunk joined by a character none of them holds.
- Deciding is a pure function of the text, so an input seen before in the
  batch gets the line it got then (inputs repeat in real batches: replays,
  evaluation sets).

The text is the same as ``decision_json_line(decide(spec, text))``, byte for
byte; ``tests/skillspec/test_decide_batch.py`` checks it on every corpus
spec against digests of the lines the previous implementation wrote.
"""

from __future__ import annotations

from _json import encode_basestring as _enc  # json's C string encoder (no ASCII escaping)
from collections.abc import Sequence

from engine.skillspec.batch_masks import END_RUN, Masks, lanes_of
from engine.skillspec.batch_tables import Tables
from engine.skillspec.decide import CompiledSpec
from engine.skillspec.matching import RUN_BYTES

#: Remember at most this many characters of lines by input.
MEMO_CHARS = 64 * 1024 * 1024
#: The memo keeps every new line up to this many, then only while it pays (see BatchDecider).
WARM = 2048
KEEP_RATIO = 8
#: Joins a chunk's inputs for the whole-chunk steps: ASCII (so the joined text stays
#: compact), neither cased nor case-ignorable, never escaped by JSON, rare in input.
JOIN = END_RUN.decode()
#: Between two inputs' runs: a run of its own (see :meth:`Masks.rules_of`).
_BETWEEN = b" " + END_RUN + b" "
#: Among a chunk's runs, what JSON escapes in a string (a quote, a backslash, a control
#: character): whitespace to ``bytes.split``, and one byte to look for.
_ESCAPED = 0x0B
#: Identifier bytes stay, :data:`JOIN` stays, what JSON escapes becomes :data:`_ESCAPED`,
#: every other byte a space.
_RUNS = bytes(
    ord(JOIN) if c == ord(JOIN) else _ESCAPED if c < 0x20 or chr(c) in '"\\' else RUN_BYTES[c]
    for c in range(256)
)


def prepared(texts: Sequence[str]) -> tuple[list[str], bytes]:
    """Each text JSON-encoded without its quotes, and the identifier runs of all of them.

    The runs are those of each text lower-cased, as UTF-8 bytes with lone
    surrogates kept (see :func:`~engine.skillspec.matching.runs_of`), every
    other byte whitespace, each text's followed by the run ``END_RUN`` (the
    byte of :data:`JOIN`). Encoding and lower-casing go character by
    character (lower-casing looks at neighbours only for a final sigma, and
    :data:`JOIN` is neither cased nor case-ignorable, so it ends a word as
    the end of a text does), so when no text holds :data:`JOIN` they are
    done once on the texts joined by it. A text with nothing JSON escapes
    (no quote, backslash or control character: none of the chunk's runs
    bytes is :data:`_ESCAPED`) is its own encoding.
    """
    joined = JOIN.join(texts)
    low = joined.lower().encode("utf-8", "surrogatepass").translate(_RUNS)
    runs = low.replace(END_RUN, _BETWEEN)
    if texts and len(runs) == len(low) + 2 * (len(texts) - 1):  # no text holds JOIN
        if _ESCAPED in low:
            return _enc(joined)[1:-1].split(JOIN), runs + _BETWEEN  # (JSON leaves JOIN be)
        return list(texts), runs + _BETWEEN
    lowered = [text.lower().encode("utf-8", "surrogatepass") for text in texts]
    return (
        [_enc(text)[1:-1] for text in texts],
        b"".join(low.translate(RUN_BYTES) + _BETWEEN for low in lowered),
    )


class BatchDecider:
    """Decision lines for inputs of one spec, remembering the lines already built.

    Remembering costs too (a kilobyte kept per line): past the first
    :data:`WARM` lines, the memo takes new ones only while at least one
    input in :data:`KEEP_RATIO` has been found there (or earlier in its
    chunk), so a batch of distinct inputs stops paying for it and a
    repetitive one keeps the benefit.
    """

    def __init__(self, compiled: CompiledSpec) -> None:
        self.compiled = compiled
        self.masks = Masks(compiled)
        self.tables = Tables(compiled, self.masks.place)
        self.lines: dict[str, str] = {}
        self.line_hits = 0
        self._room = MEMO_CHARS

    def matched_indices(self, text: str) -> list[int]:
        """The indices of the rules ``text`` matches, in file order."""
        _, runs = prepared([text])
        return lanes_of(self.masks.rules_of([text], runs)[0])

    def line(self, text: str) -> str:
        """``decision_json_line(decide(compiled, text))``."""
        return self.lines_of([text])[0]

    def lines_of(self, texts: Sequence[str]) -> list[str]:
        """:meth:`line` of each text, deciding each distinct text not remembered once."""
        memo = self.lines
        fresh = dict.fromkeys(texts)
        todo = [text for text in fresh if text not in memo] if memo else list(fresh)
        hits = len(texts) - len(todo)  # remembered, or earlier in the chunk
        self.line_hits += hits
        quoted, runs = prepared(todo)
        matched = self.masks.rules_of(todo, runs)
        lines = self.tables.lines(quoted, matched, *self.tables.lists(matched))
        stored = len(memo)
        if self._room > 0 and (stored < WARM or self.line_hits * KEEP_RATIO >= stored):
            memo.update(zip(todo, lines, strict=True))
            self._room -= sum(map(len, lines))
        if not hits:
            return lines  # every text new and once: todo is texts
        made = dict(zip(todo, lines, strict=True))
        for text in fresh.keys() - made.keys():
            made[text] = memo[text]
        return list(map(made.__getitem__, texts))
