"""The backtest's fast JSON writer writes exactly what ``print_json(result.to_json())`` writes.

On a real backtest with the lifecycle (fires of every status, reasons,
aggregates, hold spans, the parity stamp) and on results built by hand with
odd values: empty lists, non-ASCII and lone surrogates in strings, booleans
as results, a non-string target, and values ``json`` only knows through
``default=str``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli.common import print_json
from engine.config import RulesConfig
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation import backtest_json
from engine.rules.evaluation.backtest import BacktestResult, SeqRange, resolve_range
from engine.rules.evaluation.backtest_json import encode
from engine.rules.evaluation.fires import Fire
from engine.rules.evaluation.parity import compare_live
from engine.rules.language.model import CallRecord
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal, starter


def reference(result: BacktestResult) -> str:
    out = io.StringIO()
    print_json(result.to_json(), out)
    return out.getvalue()


def check(result: BacktestResult) -> None:
    want = reference(result)
    assert result.json_text() + "\n" == want
    assert result.json_bytes() + b"\n" == want.encode("utf-8")
    pieces: list[bytes] = []
    result.write_json(pieces.append)
    assert b"".join(pieces) + b"\n" == want.encode("utf-8")


def test_a_lifecycle_backtest_is_written_byte_for_byte(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    for harness in ("h1", "h2", "h1"):
        j.advance(20 * MIN)
        j.restarts(harness, 5)
        j.advance(90 * MIN)
    conn.commit()
    authority = Authority.from_rules_config(RulesConfig(enforce=("restart_same_error",)))
    result = backtest_with_lifecycle(conn, starter(), resolve_range(conn), authority)
    result.extra["parity"] = compare_live(conn, result).to_json()
    assert {f.status for f in result.fires} >= {"fired", "suppressed"}
    assert result.extra["lifecycle"]["hold_spans"]
    check(result)


def fire(**kw: Any) -> Fire:
    base: dict[str, Any] = {
        "rule": "r",
        "hash": "ab" * 32,
        "seq": 7,
        "at": 1_780_000_000_123,
        "target": "h1",
        "level": "notify",
        "effective_level": "notify",
        "status": "fired",
        "reasons": ("level notify",),
        "calls": (CallRecord("count", None, (("harness", "h1"),), 60_000, 3),),
    }
    base.update(kw)
    return Fire(**base)


ODD = [
    fire(),
    fire(reasons=(), calls=()),
    fire(target='naïve \ud800 "quoted" \\ \n tab\t', reasons=("ü", "", "\x00")),
    fire(calls=(CallRecord("exists", None, (), 1, True), CallRecord("distinct", "run", (), 2, 0))),
    fire(target=5),  # not a str: json writes it as a number
    fire(seq=True),  # not an int: the plain path
    fire(reasons=("a", 1.5, None, float("nan"))),
]


@pytest.mark.parametrize("one", ODD)
def test_odd_fires_are_written_byte_for_byte(one: Fire) -> None:
    result = BacktestResult(
        rules=(("r", "ab" * 32), ("silent", "cd" * 32)),
        range=SeqRange(1, 9, 9, 1, 2),
        rows_scanned=3,
        rows_evaluated=1,
        fires=(one, one),
        extra={"lifecycle": {"by_status": {}, "odd": [1, {}, [], {"k": (1, 2)}, Path("/x")]}},
    )
    check(result)


def test_fires_written_a_few_at_a_time_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backtest_json, "_FIRES_PER_PIECE", 2)
    result = BacktestResult(
        rules=(("r", "ab" * 32),),
        range=SeqRange(1, 9, 9, 1, 2),
        rows_scanned=3,
        rows_evaluated=1,
        fires=tuple(ODD[i % 4] for i in range(7)),  # a lone surrogate in the 3rd and 7th
    )
    pieces: list[bytes] = []
    result.write_json(pieces.append)
    assert len(pieces) > 4  # the fires came in four pieces
    check(result)


def test_no_fires_and_no_rules() -> None:
    check(
        BacktestResult(
            rules=(), range=SeqRange(0, 0, 0), rows_scanned=0, rows_evaluated=0, fires=()
        )
    )


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=4) | st.integers() | st.booleans() | st.none() | st.floats(),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_the_encoder_is_jsons_indented_encoder(value: Any) -> None:
    want = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    assert encode(value) == want
