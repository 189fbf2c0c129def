"""Batch decide writes, byte for byte, the lines the previous implementation wrote.

``fixtures/decide_digests.json`` holds, per corpus of ``decide_corpus.py``
(every corpus spec that validates, and the benchmark's 200-rule spec), the
SHA-256 of the decision lines the implementation at commit 62a486e printed
(``decision_json_line(decide(spec, text))``, generated once with that
checkout). Both of today's ways (one decision at a time, and the batch path
``skillspec decide --inputs`` runs) must give the same digests; on a
mismatch the first differing line is shown beside the one-at-a-time line.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.cli.cmd_spec_decide import CHUNK
from engine.cli.skillspec import main
from engine.jsontext import escape_surrogates
from engine.skillspec import batch_tables
from engine.skillspec.batch import WARM, BatchDecider, prepared
from engine.skillspec.decide import compile_spec, decide, decision_json_line, matched_indices
from engine.skillspec.matching import PREDICATE_KEYWORDS, contains_phrase, runs_of
from tests.benchmarks.bench_skillspec_decide import make_inputs, make_spec
from tests.skillspec.decide_corpus import corpora

DIGESTS = json.loads((Path(__file__).parent / "fixtures" / "decide_digests.json").read_text())
CORPORA = list(corpora())


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def test_every_corpus_is_there() -> None:
    names = [name for name, _, _ in CORPORA]
    if len(names) == 1:
        pytest.skip("no ../shared reference corpus beside this checkout")
    assert sorted(names) == sorted(DIGESTS)


@pytest.mark.parametrize(("name", "compiled", "inputs"), CORPORA, ids=[c[0] for c in CORPORA])
def test_lines_equal_the_previous_implementations(
    name: str, compiled: object, inputs: list[str]
) -> None:
    want = DIGESTS[name]
    assert want["inputs"] == len(inputs)
    one = [decision_json_line(decide(compiled, t)) for t in inputs]  # type: ignore[arg-type]
    batch = BatchDecider(compiled)  # type: ignore[arg-type]
    many = [batch.line(t) for t in inputs]
    again = [batch.line(t) for t in reversed(inputs)][::-1]  # remembered lines
    for ours, theirs in zip(many, one, strict=True):
        assert ours == theirs
    assert again == many
    for size in (CHUNK, 7):  # as the command does it, and in chunks that cut anywhere
        chunked = BatchDecider(compiled).lines_of  # type: ignore[arg-type]
        lines = [
            line for at in range(0, len(inputs), size) for line in chunked(inputs[at : at + size])
        ]
        assert lines == one
    assert digest(one) == want["sha256"]
    assert digest(many) == want["sha256"]


def test_the_cli_batch_prints_those_lines(tmp_path: Path) -> None:
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(json.dumps(make_spec(), indent=1), encoding="utf-8")
    texts = make_inputs(300) * 2 + ["lone \ud800 surrogate", "", "naïve"]
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(t) + "\n" for t in texts), encoding="utf-8")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["decide", str(spec), "--inputs", str(lines), "--json"]) == 0
    name, compiled, _ = CORPORA[-1]
    assert name.startswith("bench:")
    want = "".join(escape_surrogates(decision_json_line(decide(compiled, t))) + "\n" for t in texts)
    assert out.getvalue() == want


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ('"ok"\n"also ok"\n42\n', ":3:1"),
        ('"ok"\n"a" "b"\n', ":2:"),
        ('"ok"\n"unterminated\n', ":2:"),
        ('"ok"\n "padded"\n', None),
        ('"x\\u00e9"\n"\\\\"\n', None),
    ],
)
def test_input_lines_read_fast_or_slow_the_same(
    tmp_path: Path, body: str, where: str | None
) -> None:
    from engine.cli.cmd_spec_decide import read_inputs
    from engine.errors import InputError

    path = tmp_path / "in.jsonl"
    path.write_text(body, encoding="utf-8")
    if where is None:
        assert read_inputs(str(path)) == [json.loads(line) for line in body.splitlines()]
    else:
        with pytest.raises(InputError) as err:
            read_inputs(str(path))
        assert where in str(err.value)


def _each_line(text: str) -> list[str] | None:
    """What the reader accepted line by line before reading in place: the oracle."""
    from _json import scanstring

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for line in lines:
        if line[:1] != '"':
            return None
        try:
            value, end = scanstring(line, 1)
        except ValueError:
            return None
        if end != len(line):
            return None
        out.append(value)
    return out


_LINE = st.sampled_from(['"ok"', '""', '"a\\"b"', '"x\\u00e9"', ' "pad"', '"pad" ', '"a" "b"'])
_LINE |= st.sampled_from(['"open', '"\\', "42", "", '"t\\nab"', '"cr"\r', '"x"\n"y"'])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, max_size=5), st.sampled_from(["", "\n", "\n\n"]))
def test_input_lines_read_in_place_as_line_by_line(lines: list[str], end: str) -> None:
    from engine.cli.cmd_spec_decide import _string_lines

    text = "\n".join(lines) + end
    assert _string_lines(text) == _each_line(text)


_PLAIN_CHARS = st.sampled_from(
    ["a", " ", '"', "\\", "\n", "\t", "\r", "\x7f", "é", "\u2028", "\x00"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(_PLAIN_CHARS, max_size=6), max_size=5), st.sampled_from(["", "\n"]))
def test_plain_lines_are_read_as_line_by_line_or_left_to_it(lines: list[str], end: str) -> None:
    from engine.cli.cmd_spec_decide import _plain_lines

    for text in ("\n".join(lines) + end, "".join(json.dumps(t) + "\n" for t in lines)):
        plain = _plain_lines(text.encode("utf-8"), text)
        assert plain is None or plain == _each_line(text), text


def test_inputs_as_json_dumps_writes_them_are_read_plain(tmp_path: Path) -> None:
    from engine.cli.cmd_spec_decide import _plain_lines, read_inputs

    plain = [*make_inputs(50), "", "quote ' here"]
    texts = [*plain, "naïve café", "a\u2028b", "x\x7fy"]
    for values, ascii_only in ((plain, True), (texts, False), (texts, True)):
        text = "".join(json.dumps(t, ensure_ascii=ascii_only) + "\n" for t in values)
        read = _plain_lines(text.encode("utf-8"), text)
        # escaped non-ASCII text is left to the scanner; anything else is read plain
        assert read == (None if values is texts and ascii_only else values)
        assert _plain_lines(text.encode("utf-8")[:-1], text[:-1]) == read  # no final newline
        path = tmp_path / "in.jsonl"
        path.write_text(text, encoding="utf-8")
        assert read_inputs(str(path)) == values


# --- the batch path's rule bits against decide, on random specs and inputs

_VOCAB = ["go", "gos", "stop", "in sync", "a-b", "a a", "c++", "?", "test", "weekly", "every day"]
_WORDS = [*_VOCAB, "login", "repo", "x_y", "", " ", "Go!", "GOS", "ago", "sync", "in", "b", "é"]
# the character batch decide joins a chunk's inputs with, a final sigma, a lone surrogate
_WORDS += ["\x7f", "x\x7fgo", "ΑΣ", "\ud800", "İ"]
_phrases = st.lists(st.sampled_from([*_VOCAB, "", "  "]), max_size=3)
_items = st.lists(st.sampled_from(["i1", "i2", "i3", 'q"']), max_size=3)
_when = st.fixed_dictionaries(
    {},
    optional={
        "user_says_any": _phrases,
        "user_says_all_groups": st.lists(_phrases, max_size=3),
        "task_recurrence_likely": st.booleans(),
        "domain_object_task": st.booleans(),
        "interactive_prompt_likely": st.booleans(),
        "command_likely_long_running": st.booleans(),
    },
)
_rule = st.fixed_dictionaries(
    {"when": _when},
    optional={
        "prefer": st.sampled_from(["a", "b", "c"]),
        "route_order": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3),
        "forbid": _items,
        "elicit": _items,
        "after_success": _items,
        "allow": st.dictionaries(st.sampled_from(["k1", "k2"]), st.integers(0, 3), max_size=2),
        "reason": st.sampled_from(["r1", "r2", ""]),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    rules=st.lists(_rule, max_size=8),
    texts=st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), max_size=4),
)
def test_batch_lines_equal_decide_on_random_specs(
    rules: list[dict[str, Any]], texts: list[str]
) -> None:
    data = {
        "schema": "skillspec/v0",
        "id": "t.batch",
        "routes": [{"id": "a", "rank": 2}, {"id": "b", "rank": 1}, {"id": "c"}],
        "rules": [{"id": f"r{i}", **r} for i, r in enumerate(rules)],
    }
    compiled = compile_spec(data)
    want = [decision_json_line(decide(compiled, text)) for text in texts]
    batch = BatchDecider(compiled)
    for text, line in zip(texts + texts, want + want, strict=True):  # then remembered lines
        assert batch.matched_indices(text) == list(matched_indices(compiled, text)), text
        assert batch.line(text) == line, text
    for items in (0, 10**9):  # repeats dropped by a dict per input, then by the expression
        with _dict_items(items):
            assert BatchDecider(compiled).lines_of(texts + texts[::-1]) == want + want[::-1]


@contextmanager
def _dict_items(value: int) -> Iterator[None]:
    """Past how many list items per input batch decide drops repeats with dicts."""
    kept = batch_tables.DICT_ITEMS
    batch_tables.DICT_ITEMS = value
    try:
        yield
    finally:
        batch_tables.DICT_ITEMS = kept


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.sampled_from('aZ_9 -Σσς\x7fİ\ud800é"\\\n'), max_size=8), max_size=5))
def test_a_chunk_is_prepared_as_each_text_alone(texts: list[str]) -> None:
    quoted, runs = prepared(texts)
    assert quoted == [json.dumps(t, ensure_ascii=False)[1:-1] for t in texts]
    each = [runs_of(t.lower()) for t in texts]
    assert runs.split() == [run for words in each for run in [*words, b"\x7f"]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(1, 254), max_size=4), min_size=1, max_size=8))
def test_cut_gives_each_inputs_pieces_joined_by_commas(segments: list[list[int]]) -> None:
    """Empty inputs first, last, in runs: each text is its pieces, no ", " after the last."""
    pieces = [", ", *(f"p{n}, " for n in range(1, 255)), batch_tables.CUT]
    numbers = b"".join(bytes([*seg, batch_tables.SEP]) for seg in segments)
    texts = batch_tables.cut(numbers + bytes([batch_tables.SEP]), pieces, len(segments))
    assert texts == [", ".join(f"p{n}" for n in seg) for seg in segments]


_GATED_SPEC: dict[str, Any] = {
    "schema": "skillspec/v0",
    "id": "t.gated",
    "routes": [{"id": "a", "rank": 1}],
    "rules": [
        {"id": "pair", "when": {"user_says_any": ["ab cd"]}, "forbid": ["x"], "reason": "p"},
        {"id": "back", "when": {"user_says_any": ["cd ab", "ab"]}, "forbid": ["y"]},
        {"id": "same", "when": {"user_says_all_groups": [["ab ab"], ["cd"]]}, "reason": "s"},
        {"id": "odd", "when": {"user_says_any": ["ab-cd x"], "domain_object_task": True}},
    ],
}


@settings(max_examples=400, deadline=None)
@example(["xab cd ab cd", "ab cdx ab cd", "ab-cd x repo", "ab ab cd", "abs cd_ ab cds", ""])
@given(
    st.lists(
        st.lists(
            st.sampled_from(["ab", "cd", "x", "_", " ", "-", "Ab", "repo", "abs"]), max_size=9
        ).map("".join),
        min_size=1,
        max_size=6,
    )
)
def test_gated_spellings_found_as_decide_finds_them(texts: list[str]) -> None:
    """Spellings of several runs next to identifier characters (a rejected first occurrence,
    a later bounded one), plurals, a spelling whose first and last runs are one: batch
    decide finds what decide finds."""
    compiled = compile_spec(_GATED_SPEC)
    want = [decision_json_line(decide(compiled, text)) for text in texts]
    batch = BatchDecider(compiled)
    naive = [_naive_matches(_GATED_SPEC["rules"], text) for text in texts]
    assert [batch.matched_indices(t) for t in texts] == naive
    assert [list(matched_indices(compiled, t)) for t in texts] == naive
    assert batch.lines_of(texts) == want


def _naive_matches(rules: list[dict[str, Any]], text: str) -> list[int]:
    """The rules ``text`` matches, by the reference's search of each phrase: the oracle."""
    low = text.lower()
    out = []
    for i, rule in enumerate(rules):
        when = rule["when"]
        ok = any(contains_phrase(low, p) for p in when.get("user_says_any", ["?"]))
        if "user_says_any" not in when:
            ok = True
        for group in when.get("user_says_all_groups", []):
            ok = ok and any(contains_phrase(low, p) for p in group)
        for name, words in PREDICATE_KEYWORDS.items():
            if name in when:
                ok = ok and any(contains_phrase(low, w) for w in words) == when[name]
        if ok:
            out.append(i)
    return out


def _wide_spec(rules: int, items: int) -> dict[str, Any]:
    """``rules`` rules of one phrase each, forbidding ``items`` distinct items between them."""
    return {
        "schema": "skillspec/v0",
        "id": "t.wide",
        "routes": [{"id": "a", "rank": 1}],
        "rules": [
            {
                "id": f"r{i}",
                "when": {"user_says_any": [f"w{i % 40}"]},
                "forbid": [f"f{i % items}", f"f{(i * 7) % items}"],
                "after_success": [f"s{i % 3}"],
                "reason": f"why {i}",
            }
            for i in range(rules)
        ],
    }


@pytest.mark.parametrize(("rules", "items"), [(300, 20), (200, 300), (254, 254)])
def test_specs_past_a_byte_of_rules_or_items_decide_the_same(rules: int, items: int) -> None:
    compiled = compile_spec(_wide_spec(rules, items))
    rnd = random.Random(rules + items)
    texts = [" ".join(f"w{rnd.randrange(45)}" for _ in range(6)) for _ in range(300)]
    want = [decision_json_line(decide(compiled, text)) for text in texts]
    assert BatchDecider(compiled).lines_of(texts) == want


def test_a_memo_stops_taking_lines_a_batch_never_asks_for_again() -> None:
    _, compiled, _ = CORPORA[-1]
    distinct = make_inputs(WARM * 3, seed=5)
    batch = BatchDecider(compiled)
    for text in distinct:
        batch.line(text)
    assert len(batch.lines) == WARM  # past WARM, nothing found again: nothing more kept
    repeated = make_inputs(WARM // 2, seed=6) * 6
    batch = BatchDecider(compiled)
    for text in repeated:
        batch.line(text)
    assert batch.line_hits == len(repeated) - WARM // 2
    fresh = make_inputs(WARM * 2, seed=7)
    for text in fresh:
        batch.line(text)
    assert len(batch.lines) == WARM // 2 + len(fresh)  # lookups keep finding lines: keep going
