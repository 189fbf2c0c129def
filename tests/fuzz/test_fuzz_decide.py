"""Fuzz surface 4: decide inputs, in-process and through ``skillspec decide --inputs``.

Property: deciding any text never raises and always yields JSON-encodable
output; an ``--inputs`` file of JSON-string lines decides every line, and a
file with any other line is refused with that line's number (exit 2) and
prints no decisions at all.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from engine.cli.skillspec import main as skillspec
from engine.jsontext import dumps
from engine.skillspec.decide import compile_spec, decide, decision_json_line
from engine.skillspec.load import check_spec
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import fuzz_settings, scratch_dir
from tests.fuzz.strategies import json_line, json_values, raw_lines

_DIR = scratch_dir("fuzz-decide-")
SPEC = _DIR / "skill.spec.yml"
SPEC.write_text(
    """\
schema: skillspec/v0
id: fuzz.decide
title: Fuzz decide
description: Decide fuzzing.
routes:
  - id: local
    label: Local
  - id: browser
    label: Browser
rules:
  - id: browse
    when:
      user_says_any: [browse, "007", "\\u00e9t\\u00e9"]
    prefer: browser
    allow:
      code: 012
  - id: groups
    when:
      user_says_all_groups: [[open, read], [repo]]
    forbid: [force_push]
"""
)
_REPORT = check_spec(SPEC)
assert _REPORT.ok and _REPORT.data is not None, [str(d) for d in _REPORT.errors]
COMPILED = compile_spec(_REPORT.data)

texts = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["browse", "open the repo", "\ud800", "été", "007", "x" * 2_000, ""]),
)
good_lines = texts.map(json_line)
bad_lines = st.one_of(
    raw_lines, json_values.filter(lambda v: not isinstance(v, str)).map(json_line)
)


@fuzz_settings()
@given(texts)
def test_decide_never_raises_and_encodes(text: str) -> None:
    decision = decide(COMPILED, text)
    line = dumps(json.loads(decision_json_line(decision)))
    line.encode("utf-8")
    assert json.loads(line)["input"] == text


@fuzz_settings(through_store=True)
@given(
    st.lists(good_lines, min_size=1, max_size=5), st.one_of(st.none(), bad_lines), st.integers(0, 5)
)
def test_decide_inputs_decides_every_line_or_refuses_the_file(
    good: list[str], bad: str | None, where: int
) -> None:
    lines = list(good)
    if bad is not None:
        lines.insert(where % (len(lines) + 1), bad.replace("\n", " "))
    inputs = _DIR / "in.jsonl"
    inputs.write_text("".join(x + "\n" for x in lines), encoding="utf-8", errors="surrogatepass")
    code, out, err = run_cli(skillspec, ["decide", str(SPEC), "--inputs", str(inputs), "--json"])
    assert_clean(code, out, err)
    if code == 0:
        # JSON lines end at "\n" only: str.splitlines() would also split at U+0085 or U+2028,
        # which a decision echoes raw (ensure_ascii=False, as the reference prints them).
        decided = [json.loads(x) for x in out.split("\n")[:-1]]
        assert [d["input"] for d in decided] == [json.loads(x) for x in lines]
    else:
        assert code == 2 and f"{inputs}:" in err
        assert json.loads(out)["ok"] is False  # one error object, no decision half-printed
