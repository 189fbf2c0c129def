"""Deterministic decide corpora: every corpus spec that validates, and the benchmark's spec.

Each corpus pairs a compiled spec with inputs: the spec's own scenario
inputs, inputs stitched from its phrases and the boolean keywords (so many
rules match, in many combinations), and odd text (case, punctuation,
non-ASCII, a lone surrogate, an empty line). ``fixtures/decide_digests.json``
holds the SHA-256 of the decision lines the implementation at commit 62a486e
printed for these inputs; see ``test_decide_batch.py``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from engine.skillspec.matching import PREDICATE_KEYWORDS
from tests.conftest import REFERENCE

FILLER = ["the", "a", "please", "and", "then", "my", "now", "for", "with", "Again,", "ok?"]
ODD = ["", " ", "ÜBER straße", "tab\there", "emoji 🎉 deploys", "lone \ud800 surrogate", "x" * 300]


def phrases_of(data: Any) -> list[str]:
    """Every phrase a spec's rules name (user_says_any and every all_groups entry)."""
    out: list[str] = []
    for rule in data.get("rules") or []:
        when = rule.get("when") or {} if isinstance(rule, dict) else {}
        if not isinstance(when, dict):
            continue
        out += [p for p in when.get("user_says_any") or [] if isinstance(p, str)]
        for group in when.get("user_says_all_groups") or []:
            if isinstance(group, list):
                out += [p for p in group if isinstance(p, str)]
    return out


def stitched(data: Any, seed: str, n: int) -> list[str]:
    rnd = random.Random(seed)
    words = phrases_of(data) or ["nothing"]
    keys = [k for ks in PREDICATE_KEYWORDS.values() for k in ks]
    out = []
    for _ in range(n):
        parts = rnd.sample(words, min(len(words), rnd.randint(1, 4)))
        parts += rnd.sample(FILLER, 3)
        if rnd.random() < 0.4:
            parts.append(rnd.choice(keys))
        rnd.shuffle(parts)
        text = " ".join(parts)
        out.append(text.upper() if rnd.random() < 0.1 else text)
    return out


def corpora() -> Iterator[tuple[str, Any, list[str]]]:
    """(name, compiled spec, inputs) for each corpus, in a fixed order."""
    from engine.skillspec.decide import compile_spec
    from engine.skillspec.load import check_spec
    from tests.benchmarks.bench_skillspec_decide import make_inputs, make_spec

    for path in sorted(REFERENCE.rglob("*skill.spec.yml")):
        report = check_spec(path)
        if not report.ok or report.data is None:
            continue
        name = str(path.relative_to(REFERENCE))
        tests = [str(t.get("input", "")) for t in report.data.get("tests") or []]
        inputs = tests + stitched(report.data, name, 120) + ODD
        yield name, compile_spec(report.data), inputs
    bench = make_spec()
    yield "bench:make_spec()", compile_spec(bench), make_inputs(600) + stitched(bench, "b", 200)
