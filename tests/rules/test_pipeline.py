"""The pipelined candidate read: same rows and fires, errors raised here, stops when told.

Fire-for-fire equality over generated rules and journals is also the property
test's job (test_prefilter_properties runs every mode with ``pipeline=True``);
these pin the mechanics: the rows and fires are the in-thread read's, with
tallies, shape tables and the lifecycle, over many small chunks; an error in
the producer thread is raised in the replay as the same ``sqlite3`` error (and
the CLI's usual message); a cancel, a Ctrl-C or a producer stuck in a long
statement all end the thread and leave no table behind; a connection another
connection could not read as it is (in memory, a transaction open) is read
in-thread.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.cli.harness import main as harness
from engine.config import HarnessConfig
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation import backtest as backtest_module
from engine.rules.evaluation import pipeline
from engine.rules.evaluation.backtest import resolve_range, run_backtest
from engine.rules.evaluation.candidates import CandidatePlan
from engine.rules.evaluation.window import ROW_SELECT
from engine.rules.language.prefilter import Term
from engine.store import db
from engine.store.db import connect
from tests.rules.test_evaluator import CAUSE, RESTART_RULE, T0, insert, make_rule, row
from tests.rules.test_prefilter_properties import full_keys
from tests.rules.test_tallies import BY_PATH, EDITED, HARNESSES, edit_journal, edited

PRODUCER = "backtest-candidates"
CHURN = (
    'event.type == "churn" && exists({"path": event.path, "type": "file_edited"}, duration("30m"))'
)
PER_HARNESS = (
    'event.type == "file_edited" && count({"harness": event.harness}, duration("5m")) >= 4'
)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks and short fetches, so merging across chunk edges is exercised."""
    monkeypatch.setattr(pipeline, "CHUNK", 37)
    monkeypatch.setattr(pipeline, "FETCH", 5)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The pipelines the replays started (None where one read in-thread)."""
    seen: list[Any] = []
    real = backtest_module.start_pipeline

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        seen.append(found)
        return found

    monkeypatch.setattr(backtest_module, "start_pipeline", spy)
    return seen


def _producers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == PRODUCER]


def _temp_tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_temp_master WHERE type='table'")]


def _rules() -> list[Any]:
    """Tallied gates, a shape-table gate, an open selector answered by SQL, a hold (ticks)."""
    return [
        edited("by_path", f"{EDITED} && {BY_PATH}"),
        edited("harnesses", f"{EDITED} && {HARNESSES}", level="hold"),
        edited("churn", CHURN),
        edited("busy", PER_HARNESS),
    ]


@pytest.mark.parametrize("mode", ["auto", "tally", "table", "sql", "window"])
def test_pipelined_replays_read_the_same_rows_and_fire_the_same(
    tmp_path: Path, mode: str, started: list[Any]
) -> None:
    conn = connect(edit_journal(tmp_path / "p.db", n=900), readonly=True)
    rules = _rules()
    authority = Authority.from_config(HarnessConfig())
    whole = resolve_range(conn)
    for seq_range in (whole, resolve_range(conn, from_seq=whole.first_seq + whole.rows // 3)):
        alone = run_backtest(conn, rules, seq_range, replay=mode, pipeline=False)
        piped = run_backtest(conn, rules, seq_range, replay=mode, pipeline=True)
        assert full_keys(piped.fires) == full_keys(alone.fires)
        assert (piped.rows_scanned, piped.rows_evaluated) == (
            alone.rows_scanned,
            alone.rows_evaluated,
        )
        life_alone = backtest_with_lifecycle(conn, rules, seq_range, authority, replay=mode,
                                             pipeline=False)  # fmt: skip
        life_piped = backtest_with_lifecycle(conn, rules, seq_range, authority, replay=mode,
                                             pipeline=True)  # fmt: skip
        assert full_keys(life_piped.fires) == full_keys(life_alone.fires)
        assert life_piped.extra == life_alone.extra
    assert len(alone.fires) > 20 and {f.rule for f in alone.fires} >= {"by_path", "busy"}
    # Each forced run ran a producer, except where the window index needs every row.
    assert len(started) == 4
    assert all((s is None) == (mode == "window") for s in started)
    assert _producers() == [] and _temp_tables(conn) == []


@pytest.mark.parametrize("producers", [1, 2, 3])
def test_the_tally_rows_merge_into_the_chunks_in_seq_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, producers: int
) -> None:
    monkeypatch.setattr(pipeline, "PRODUCERS", producers)  # chunks taken from each in turn
    conn = connect(edit_journal(tmp_path / "m.db", n=600), readonly=True)
    rules = [edited("by_path", f"{EDITED} && {BY_PATH}"), edited("churn", CHURN)]
    rng = resolve_range(conn)
    alone = run_backtest(conn, rules, rng, replay="tally", pipeline=False)
    piped = run_backtest(conn, rules, rng, replay="tally", pipeline=True)
    seqs = [f.seq for f in piped.fires]
    assert seqs == sorted(seqs) and full_keys(piped.fires) == full_keys(alone.fires)
    assert {f.rule for f in piped.fires} == {"by_path", "churn"}


def _odd_journal(path: Path) -> sqlite3.Connection:
    """Rows whose values JSON holds exactly, and some it does not (REAL, BLOB) in a few chunks."""
    conn = connect(path)
    rows = []
    for i in range(300):
        odd = i in (40, 41, 200)
        project = b"\x00\xff" if odd else 'p\x00q\n"é🙂'
        n = 1.5 if i == 41 else 2**62 + i
        rows.append(row(T0 + i * 1000, "tool_call", harness=f"h{i % 3}", project=project, n=n,
                        outcome="error" if i % 2 else None))  # fmt: skip
    insert(conn, rows)
    return conn


def test_rows_are_what_the_select_returns_whatever_the_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _odd_journal(tmp_path / "v.db")
    plan = CandidatePlan((Term((("kind", frozenset({"run_event"})),)),), scan=True)
    want = list(plan.rows(conn, ROW_SELECT, "seq BETWEEN ? AND ?", (1, 300)))
    read_here: list[int] = []
    real = pipeline.PipelinedCandidates._fetch

    def fetch(self: Any, seqs: Any) -> Any:
        read_here.append(seqs[0])
        return real(self, seqs)

    monkeypatch.setattr(pipeline.PipelinedCandidates, "_fetch", fetch)
    stream = pipeline.start_pipeline(conn, plan, (), (), (1, 300), rows=300, force=True)
    assert stream is not None
    try:
        got = list(stream.rows())
    finally:
        stream.close()
    assert got == want and len(got) == 300
    # Only the two chunks holding a REAL or a BLOB (rows 38-74 and 186-222) were read by seq.
    assert read_here == [38, 186]
    assert [type(r[-1]) for r in got[40:43]] == [int, float, int]
    assert type(got[200][6]) is bytes and got[0][6] == 'p\x00q\n"é🙂'


def test_text_that_is_not_utf8_fails_as_it_does_in_thread(tmp_path: Path) -> None:
    conn = _odd_journal(tmp_path / "u.db")
    conn.execute("UPDATE rule_journal SET project = CAST(x'c3' AS TEXT) WHERE seq = 250")
    errors = []
    for piped in (False, True):
        with pytest.raises(sqlite3.OperationalError) as caught:
            run_backtest(conn, [make_rule("r", 'event.type == "tool_call"')], resolve_range(conn),
                         prefilter=True, pipeline=piped)  # fmt: skip
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "UTF-8" in errors[0]
    assert _producers() == []


class _Failing(sqlite3.Connection):
    """A producer connection whose third chunk read fails as a corrupt page would."""

    chunks = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.startswith("SELECT group_concat(seq)"):
            _Failing.chunks += 1
            if _Failing.chunks == 3:
                raise sqlite3.DatabaseError("database disk image is malformed")
        return super().execute(sql, *args)


@pytest.fixture
def failing_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    _Failing.chunks = 0

    def open_failing(path: str, **_kw: Any) -> sqlite3.Connection:
        uri = f"file:{path}?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Failing)

    monkeypatch.setattr(db, "connect", open_failing)


def test_a_producer_error_is_raised_in_the_replay_as_the_same_error(
    tmp_path: Path, failing_producer: None
) -> None:
    conn = connect(edit_journal(tmp_path / "e.db"), readonly=True)
    with pytest.raises(sqlite3.DatabaseError, match=r"^database disk image is malformed$"):
        run_backtest(conn, _rules(), resolve_range(conn), pipeline=True)
    assert _Failing.chunks >= 3  # it failed in a producer, not before they started
    assert _producers() == [] and _temp_tables(conn) == []
    # The connection is fine afterwards, and a replay without the producer still works.
    assert run_backtest(conn, _rules(), resolve_range(conn), pipeline=False).fires


def test_the_cli_reports_a_producer_error_like_any_read_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failing_producer: None,
) -> None:
    path = tmp_path / "c.db"
    conn = connect(path)
    insert(conn, [row(T0 + i * 1000, "restart", cause_digest=CAUSE) for i in range(400)])
    conn.close()
    monkeypatch.setattr(pipeline, "MIN_ROWS", 0)
    # A rule matching every row: the plan reads them in one pass.
    rules = tmp_path / "r.yml"
    rules.write_text(
        'name: r\non: run_event\nwhen: event.harness == "h1"\nlevel: annotate\n'
        "target: harness\nmessage: m\n",
        encoding="utf-8",
    )
    code = harness(["rules", "backtest", str(rules), "--json", "--store", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and _Failing.chunks >= 3
    assert f"{path}: cannot read the journal: database disk image is malformed" in err
    assert "Traceback" not in err
    assert _producers() == []


def test_a_cancel_between_batches_stops_the_producer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "BUDGET", 1)  # one chunk waits at a time
    conn = connect(edit_journal(tmp_path / "k.db", n=900), readonly=True)
    cancel = threading.Event()

    def progress(_p: object) -> None:
        cancel.set()

    rules = [edited("busy", PER_HARNESS)]
    result = run_backtest(conn, rules, resolve_range(conn), pipeline=True, batch=3,
                          progress=progress, cancel=cancel)  # fmt: skip
    assert result.cancelled and result.rows_scanned == 3
    assert _producers() == [] and _temp_tables(conn) == []


def test_ctrl_c_in_the_replay_stops_the_producer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "BUDGET", 1)
    conn = connect(edit_journal(tmp_path / "i.db", n=900), readonly=True)

    def progress(_p: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_backtest(conn, _rules(), resolve_range(conn), pipeline=True, batch=3,
                     progress=progress)  # fmt: skip
    assert _producers() == [] and _temp_tables(conn) == []


class _Announcing(sqlite3.Connection):
    """A producer connection that says when its first chunk statement starts."""

    running = threading.Event()

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.startswith("SELECT group_concat(seq)"):
            _Announcing.running.set()
        return super().execute(sql, *args)


def test_closing_interrupts_a_statement_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(edit_journal(tmp_path / "s.db"), readonly=True)
    _Announcing.running.clear()

    def open_announcing(path: str, **_kw: Any) -> sqlite3.Connection:
        uri = f"file:{path}?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Announcing)

    monkeypatch.setattr(db, "connect", open_announcing)
    # A term whose test never ends on its own (a recursive count to 10^15).
    endless = ("(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c"
               " WHERE i < 1000000000000000) SELECT max(i) FROM c) > 0", ())  # fmt: skip
    plan = CandidatePlan((Term((), (endless,)),), scan=True)
    stream = pipeline.start_pipeline(conn, plan, (), (), (1, 10), rows=10, force=True)
    assert stream is not None
    assert _Announcing.running.wait(timeout=30)
    stream.close()  # returns once the statement is interrupted, not when it would end
    assert _producers() == []
    for producer in stream._producers:  # and their connections are closed
        with pytest.raises(sqlite3.ProgrammingError):
            producer.conn.execute("SELECT 1")


@pytest.fixture
def uncommitted(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = connect(tmp_path / "u.db")
    insert(conn, [row(T0 + i * 1000, "restart", cause_digest=CAUSE) for i in range(30)])
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO rule_journal (at, kind, type, source, harness, cause_digest)"
        " VALUES (?, 'run_event', 'restart', 'observer', 'h1', ?)",
        [(T0 + 40_000 + i, CAUSE) for i in range(30)],
    )
    yield conn
    conn.rollback()
    conn.close()


def test_rows_a_second_connection_cannot_see_are_read_in_thread(
    uncommitted: sqlite3.Connection, started: list[Any]
) -> None:
    rule = make_rule("r", RESTART_RULE, cooldown="0s")
    rng = resolve_range(uncommitted)
    assert rng.rows == 60  # the uncommitted rows are part of the range here
    piped = run_backtest(uncommitted, [rule], rng, pipeline=True)
    alone = run_backtest(uncommitted, [rule], rng, pipeline=False)
    assert full_keys(piped.fires) == full_keys(alone.fires)
    assert max(f.seq for f in piped.fires) > 30
    memory = sqlite3.connect(":memory:")
    assert pipeline._store_file(memory) == ""
    assert started[0] is None


class _NoJson(sqlite3.Connection):
    """A connection to an SQLite built without the JSON functions."""

    closed = False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if "json_" in sql:
            raise sqlite3.OperationalError("no such function: json_group_array")
        return super().execute(sql, *args)

    def close(self) -> None:
        _NoJson.closed = True
        super().close()


def test_an_sqlite_without_json_reads_in_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = connect(edit_journal(tmp_path / "j.db"), readonly=True)

    def open_no_json(path: str, **_kw: Any) -> sqlite3.Connection:
        uri = f"file:{path}?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_NoJson)

    monkeypatch.setattr(db, "connect", open_no_json)
    plan = CandidatePlan((Term((("kind", frozenset({"graph_event"})),)),), scan=True)
    assert pipeline.start_pipeline(conn, plan, (), (), (1, 10), rows=10, force=True) is None
    assert _NoJson.closed
    rules = _rules()
    rng = resolve_range(conn)
    piped = run_backtest(conn, rules, rng, pipeline=True)
    assert full_keys(piped.fires) == full_keys(run_backtest(conn, rules, rng, pipeline=False).fires)
