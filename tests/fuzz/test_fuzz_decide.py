"""Fuzz surface 4: decide inputs, in-process and through ``skillspec decide --inputs``.

Property: deciding any text never raises and always yields JSON-encodable
output; an ``--inputs`` file of JSON-string lines decides every line, and a
file with any other line is refused with that line's number (exit 2) and
prints no decisions at all.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engine.cli.cmd_spec_decide import read_inputs
from engine.cli.skillspec import main as skillspec
from engine.errors import InputError
from engine.jsontext import dumps
from engine.skillspec.decide import compile_spec, decide, decision_json_line
from engine.skillspec.load import check_spec
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import depth_sweep, fuzz_settings, scratch_dir
from tests.fuzz.strategies import (
    DEEPEST,
    depths,
    json_line,
    json_parse_limit,
    json_values,
    nested_json,
    nesting_kinds,
    raw_lines,
)

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


def test_an_inputs_line_at_every_depth_is_refused_at_its_line() -> None:
    """Issue 22's sweep: a decide input nested at each depth, on line 2 of the file."""
    inputs = _DIR / "deep.jsonl"
    for depth in depth_sweep(DEEPEST):
        inputs.write_text(f'"fine"\n{nested_json(depth, "list" if depth % 2 else "object")}\n')
        try:
            read_inputs(str(inputs))
        except InputError as exc:
            assert exc.diagnostics[0].location.line == 2, depth
        else:
            raise AssertionError(f"a nested line was accepted at depth {depth}")


@fuzz_settings(through_store=True)
@given(depths, nesting_kinds, st.integers(0, 3))
def test_decide_inputs_refuses_a_deep_line(depth: int, kind: str, where: int) -> None:
    lines = ['"browse"', '"open the repo"', '"x"']
    lines.insert(where, nested_json(depth, kind))
    inputs = _DIR / "deep-cli.jsonl"
    inputs.write_text("".join(x + "\n" for x in lines))
    code, out, err = run_cli(skillspec, ["decide", str(SPEC), "--inputs", str(inputs), "--json"])
    assert_clean(code, out, err)
    assert code == 2 and f"{inputs}:{where + 1}:" in err


def _trace_run() -> Path:
    root = _DIR / "traces"
    code, _out, err = run_cli(
        skillspec, ["decide", str(SPEC), "--input", "browse", "--trace-dir", str(root)]
    )
    assert code == 0, err
    return next(root.iterdir())


RUN = _trace_run()
EVENT = sorted((RUN / "events").iterdir())[0]
EVENT_TEXT = EVENT.read_text()


def _trace_verdict(depth: int, kind: str, command: str) -> None:
    EVENT.write_text(EVENT_TEXT.rstrip()[:-1] + f', "extra": {nested_json(depth, kind)}}}')
    argv = (
        ["trace", "compact", str(RUN), "--json"]
        if command == "compact"
        else ["trace", "align", str(SPEC), "--decision-trace", str(RUN), "--json"]
    )
    code, out, err = run_cli(skillspec, argv)
    assert_clean(code, out, err)
    assert code in (0, 1, 2)
    if code == 2:
        assert str(EVENT) in err and "nested deeper" in err


def test_a_trace_event_at_every_depth_is_compacted_or_refused() -> None:
    """An event file nested ~985 deep parsed, then overflowed compact's and align's re-encoding.

    Under pytest the failing depths were the 11 under where ``json.loads`` gives
    up from this frame; the band swept is 40 deep.
    """
    try:
        for depth in depth_sweep(json_parse_limit() + 2, band=40, stride=60):
            _trace_verdict(depth, "list" if depth % 2 else "object", "compact")
            _trace_verdict(depth, "object", "align")
    finally:
        EVENT.write_text(EVENT_TEXT)


@fuzz_settings(through_store=True)
@given(depths, nesting_kinds, st.sampled_from(["compact", "align"]))
def test_a_trace_event_at_any_depth(depth: int, kind: str, command: str) -> None:
    try:
        _trace_verdict(depth, kind, command)
    finally:
        EVENT.write_text(EVENT_TEXT)
