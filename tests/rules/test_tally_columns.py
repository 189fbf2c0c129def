"""A tally's rows read as columns by a producer: what the row read keeps, or that read itself.

The pipeline's first producer reads each tally's rows a span of journal time
at a time (engine.rules.evaluation.tally_columns); these pin that the tally
then keeps exactly what it keeps reading row by row, on generated journals,
and that anything the columns cannot carry (a value that is not text, text
that is not UTF-8, time going back, a store error) makes it read row by row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.rules.evaluation import tallies as tallies_module
from engine.rules.evaluation import tally_columns
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.tallies import Tally
from engine.store.db import connect
from tests.rules.test_evaluator import T0, insert, make_rule, row
from tests.rules.test_prefilter_properties import full_keys
from tests.rules.test_tallies import BY_PATH, COUNT_KEY, DISTINCT_KEY, EDITED, HARNESSES, edited

FILTERS = (("type", frozenset({"file_edited"})),)
GATES = {
    "by_path": (edited("by_path", f"{EDITED} && {BY_PATH}"),),
    "harnesses": (edited("harnesses", f"{EDITED} && {HARNESSES}"),),
}
TEXT = st.sampled_from(["a.py", "b,c.py", 'q"u', "é🙂", "n\x00l", "", None])


#: Two types: SQL reads them type by type (index order), the tally needs them in seq order.
TWO_TYPES = (("type", frozenset({"file_edited", "churn"})),)


def _tally(filters: tuple[Any, ...] = FILTERS) -> Tally:
    from engine.rules.language.prefilter import for_rule

    gates = {name: for_rule(cr).gates for name, (cr,) in GATES.items()}
    return Tally(filters, (COUNT_KEY, DISTINCT_KEY), gates)


def _state(conn: sqlite3.Connection, tally: Tally) -> tuple[Any, ...]:
    tables = {
        name: [r[0] for r in conn.execute(f"SELECT seq FROM {table} ORDER BY seq")]
        for name, table in tally.tables.items()
    }
    values = {key: list(v) for key, v in tally._values.items()}
    return list(tally._seqs), values, tables


def _run(
    path: Path, columns: bool, first_seq: int = 1, filters: tuple[Any, ...] = FILTERS
) -> tuple[Any, ...]:
    """Tally the journal at ``path`` from ``first_seq``: (read as columns, what it kept)."""
    conn = connect(path, readonly=True)
    other = connect(path, readonly=True)
    tally = _tally(filters)
    spans: Iterator[Any] | None = None
    if columns:
        sql, params = tally.column_statement()
        spans = tally_columns.read(other, sql, params, T0 - 1, 10**9)
    used = tally.run(conn, T0 - 1, first_seq, 10**9, spans)
    state = _state(conn, tally)
    tally.drop(conn)
    conn.close()
    other.close()
    return used, state


def _journal(path: Path, edits: list[tuple[int, str | None, str | None]]) -> Path:
    conn = connect(path)
    at, rows = T0, []
    for i, (step, harness, file) in enumerate(edits):
        at += step
        typ = "churn" if i % 5 == 4 else "file_edited"
        rows.append(row(at, typ, kind="graph_event", harness=harness, path=file))
        if step > 100_000:
            rows.append(row(at, "tick"))
    insert(conn, rows)
    conn.close()
    return path


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from([0, 1, 5_000, 60_000, 400_000]), TEXT, TEXT), max_size=80
    ),
    first=st.integers(1, 60),
    spans=st.integers(1, 5),
    filters=st.sampled_from([FILTERS, TWO_TYPES]),
)
def test_columns_keep_what_the_row_read_keeps(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    edits: list[tuple[int, str | None, str | None]],
    first: int,
    spans: int,
    filters: tuple[Any, ...],
) -> None:
    monkeypatch.setattr(tally_columns, "SPANS", spans)
    monkeypatch.setattr(tallies_module, "SWEEP_EVERY", 7)  # batches cut inside spans too
    path = _journal(tmp_path_factory.mktemp("c") / "j.db", edits)
    used, by_columns = _run(path, columns=True, first_seq=first, filters=filters)
    assert used
    assert by_columns == _run(path, columns=False, first_seq=first, filters=filters)[1]


def _odd(path: Path, sql: str) -> Path:
    _journal(path, [(5_000, "h1", "a.py")] * 6)
    conn = connect(path)
    conn.execute(sql)
    insert(conn, [row(T0 + 10**6, "file_edited", kind="graph_event", harness="h2", path="a.py")])
    conn.close()
    return path


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE rule_journal SET path = x'00ff' WHERE seq = 4",  # a BLOB in a key column
        "UPDATE rule_journal SET harness = x'41' WHERE seq = 2",  # in the distinct field
        f"UPDATE rule_journal SET at = {T0 + 999_000} WHERE seq = 2",  # journal time going back
    ],
)
def test_what_columns_cannot_carry_is_read_row_by_row(tmp_path: Path, sql: str) -> None:
    path = _odd(tmp_path / "o.db", sql)
    used, by_columns = _run(path, columns=True)
    assert not used
    assert by_columns == _run(path, columns=False)[1]


def test_text_that_is_not_utf8_fails_as_the_row_read_fails(tmp_path: Path) -> None:
    path = _odd(tmp_path / "u.db", "UPDATE rule_journal SET path = CAST(x'61ff' AS TEXT)")
    with pytest.raises(sqlite3.OperationalError) as row_read:
        _run(path, columns=False)
    with pytest.raises(sqlite3.OperationalError) as by_columns:
        _run(path, columns=True)
    assert str(by_columns.value) == str(row_read.value)


def test_a_store_error_in_a_span_reads_row_by_row(tmp_path: Path) -> None:
    path = _journal(tmp_path / "e.db", [(5_000, "h1", "a.py")] * 20)
    conn = connect(path, readonly=True)
    tally = _tally()
    sql, params = tally.column_statement()
    good = list(tally_columns.read(conn, sql, params, T0 - 1, 10**9))
    failing = [good[0], sqlite3.DatabaseError("database disk image is malformed"), *good[1:]]
    assert tally.run(conn, T0 - 1, 1, 10**9, iter(failing)) is False
    assert _state(conn, tally) == _run(path, columns=False)[1]


def test_a_pipelined_replay_reads_each_tally_as_columns_or_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tallies: the first meets a value columns cannot carry, the second still gets its own."""
    path = _odd(tmp_path / "p.db", "UPDATE rule_journal SET path = x'00ff' WHERE seq = 4")
    conn = connect(path)
    cause = "c" * 64
    insert(conn, [row(T0 + i * 30_000, "restart", cause_digest=cause) for i in range(12)])
    conn.close()
    restarts = make_rule(
        "restarts",
        'event.type == "restart" && count({"harness": event.harness, "type": "restart"},'
        ' duration("5m")) >= 3',
        cooldown="0s",
    )
    rules = [*(cr for (cr,) in GATES.values()), restarts]
    used: list[bool] = []
    real = Tally.run

    def spy(self: Tally, *args: Any, **kwargs: Any) -> bool:
        found = real(self, *args, **kwargs)
        used.append(found)
        return found

    monkeypatch.setattr(Tally, "run", spy)
    conn = connect(path, readonly=True)
    rng = resolve_range(conn)
    piped = run_backtest(conn, rules, rng, replay="tally", pipeline=True)
    assert sorted(used) == [False, True]  # the edits row by row, the restarts as columns
    used.clear()
    alone = run_backtest(conn, rules, rng, replay="tally", pipeline=False)
    assert used == [False, False]
    assert full_keys(piped.fires) == full_keys(alone.fires)
    assert {f.rule for f in alone.fires} >= {"by_path", "restarts"}
