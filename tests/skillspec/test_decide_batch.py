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
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from engine.cli.skillspec import main
from engine.jsontext import escape_surrogates
from engine.skillspec.batch import BatchDecider
from engine.skillspec.decide import decide, decision_json_line
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
