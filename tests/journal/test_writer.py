"""Admission: dense seq, monotonic at, atomic batches, counters, history import."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.journal.reader import journal_stats
from engine.journal.rows import RowError
from engine.journal.writer import Committer, read_counters
from tests.journal._util import T0, FakeClock, all_rows, store, tool_call


def test_seq_is_dense_and_at_never_goes_back(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    clock = FakeClock(T0 + 500)
    c = Committer(conn, clock=clock, ticks=False)
    first = c.admit([tool_call(), tool_call("h2")])
    assert (first.first_seq, first.last_seq, first.at) == (1, 2, T0 + 500)
    clock.now = T0 + 100  # the wall clock steps back
    second = c.admit([tool_call("h3")])
    assert second.at == T0 + 500
    clock.now = T0 + 900
    third = c.admit([tool_call("h4")])
    rows = all_rows(conn)
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    assert [r[1] for r in rows] == [T0 + 500, T0 + 500, T0 + 500, T0 + 900]
    assert third.first_seq == 4


def test_refused_rows_are_counted_and_the_rest_admitted(tmp_path: Path) -> None:
    path, conn = store(tmp_path)
    c = Committer(conn, clock=FakeClock(), ticks=False)
    result = c.admit([tool_call(), {"type": "tool_call", "harness": "a b"}, {"type": "tick"}])
    assert result.admitted == 1
    assert [(r.index, r.field) for r in result.refused] == [(1, "harness"), (2, "kind")]
    assert read_counters(conn)["refused"] == 2
    assert journal_stats(conn, path).refused == 2
    assert len(all_rows(conn)) == 1


def test_drops_reported_by_a_queue_are_persisted(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    c = Committer(conn, clock=FakeClock(), ticks=False)
    c.admit([], dropped=5)
    c.admit([tool_call()], dropped=2)
    assert read_counters(conn)["dropped"] == 7


def test_a_failed_batch_leaves_nothing_behind(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    c = Committer(conn, clock=FakeClock(), ticks=False)
    c.admit([tool_call()])
    conn.execute("CREATE TRIGGER boom BEFORE INSERT ON rule_journal WHEN NEW.harness = 'bad' "
                 "BEGIN SELECT RAISE(ABORT, 'boom'); END")  # fmt: skip
    with pytest.raises(Exception, match="boom"):
        c.admit([tool_call("ok1"), tool_call("bad"), tool_call("ok2")])
    assert [r[5] for r in all_rows(conn)] == ["h1"]
    assert not conn.in_transaction
    conn.execute("DROP TRIGGER boom")
    assert c.admit([tool_call("h9")]).first_seq == 2


def test_seq_does_not_restart_after_everything_is_deleted(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    c = Committer(conn, clock=FakeClock(), ticks=False)
    c.admit([tool_call(), tool_call()])
    conn.execute("DELETE FROM rule_journal")
    assert c.admit([tool_call()]).first_seq == 3


def _hist(at: int, harness: str = "h1") -> tuple[object, ...]:
    return (at, "run_event", "tool_call", "observer", harness, None, None, "bash", *[None] * 7)


def test_history_import_keeps_its_own_at(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    result = Committer(conn).import_history([_hist(T0), _hist(T0), _hist(T0 + 10)])
    assert (result.admitted, result.first_seq, result.last_seq) == (3, 1, 3)
    assert [r[1] for r in all_rows(conn)] == [T0, T0, T0 + 10]


def test_history_going_back_in_time_admits_nothing(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    with pytest.raises(RowError) as info:
        Committer(conn).import_history([_hist(T0 + 10), _hist(T0 + 20), _hist(T0 + 15)], batch=2)
    assert info.value.field == "at"
    assert all_rows(conn) == []


def test_history_before_the_store_last_at_is_refused(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    Committer(conn, clock=FakeClock(T0 + 1000), ticks=False).admit([tool_call()])
    with pytest.raises(RowError, match="store's last at"):
        Committer(conn).import_history([_hist(T0)])
    assert len(all_rows(conn)) == 1


def test_a_bad_history_row_admits_nothing(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    bad = (T0 + 5, "run_event", "tool_call", "observer", "h 1", *[None] * 10)
    with pytest.raises(RowError) as info:
        Committer(conn).import_history([_hist(T0), bad])
    assert info.value.field == "harness"
    assert all_rows(conn) == []


def test_non_atomic_import_commits_batch_by_batch(tmp_path: Path) -> None:
    _, conn = store(tmp_path)
    seen: list[int] = []
    rows = [_hist(T0 + i) for i in range(10)]
    Committer(conn).import_history(rows, atomic=False, batch=4, on_batch=seen.append)
    assert seen == [4, 8, 10]
    with pytest.raises(RowError):
        Committer(conn).import_history([_hist(T0 + 20), _hist(T0 + 1)], atomic=False, batch=1)
    assert len(all_rows(conn)) == 11  # the first batch of the second import stayed
