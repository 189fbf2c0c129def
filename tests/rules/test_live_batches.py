"""Live batches against a shared store: evaluated before the write lock, committed whole.

Serve's journal writer and the evaluator share one store. A batch is
evaluated before its write transaction, so a journal commit never waits for
Python evaluation; what must still hold: hooks that write on a row write inside
the batch's transaction (all or nothing), and an evaluator whose cursor another
evaluator advanced resumes from the store instead of storing a batch twice.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from engine.rules.evaluation.fires import Fire, list_fires
from engine.rules.evaluation.hooks import DefaultHooks, FireDecision, RowView
from engine.rules.evaluation.live import LiveEvaluator, read_cursor
from engine.rules.language.model import Rule
from engine.store.db import connect, set_busy_timeout
from engine.store.txn import immediate
from tests.rules.test_evaluator import MIN, T0, insert, make_rule, row

EVERY_RESTART = 'event.type == "restart"'


class _WritesDuringMatch(DefaultHooks):
    """On each match, another connection (another thread) appends a journal row at once."""

    def __init__(self, path: Path, rows: Sequence[tuple[object, ...]]) -> None:
        self.path = path
        self.pending = list(rows)
        self.outcomes: list[str] = []

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        if self.pending:
            new = self.pending.pop(0)
            thread = threading.Thread(target=self._append, args=(new,))
            thread.start()
            thread.join()
        return super().on_match(rule, target, row, now_ms)

    def _append(self, new: tuple[object, ...]) -> None:
        writer = connect(self.path)
        set_busy_timeout(writer, 0)  # no waiting: the lock is free or the write fails
        try:
            with immediate(writer):
                insert(writer, [new])
            self.outcomes.append("committed")
        except sqlite3.OperationalError as exc:
            self.outcomes.append(str(exc))
        finally:
            writer.close()


def test_a_journal_write_is_not_kept_waiting_while_a_batch_is_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = connect(path)
    insert(store, [row(T0 + i * MIN, "restart") for i in range(3)])
    late = [row(T0 + (10 + i) * MIN, "restart") for i in range(3)]
    hooks = _WritesDuringMatch(path, late)
    ev = LiveEvaluator(store, [make_rule("r", EVERY_RESTART, cooldown="0s")], hooks=hooks)

    first = ev.step()

    assert hooks.outcomes == ["committed"] * 3
    assert (first.rows, [f.seq for f in first.fires]) == (3, [1, 2, 3])
    # The rows written meanwhile are evaluated by the next batches, each once.
    ev.run_until_idle()
    assert [f.seq for f in list_fires(store)] == [1, 2, 3, 4, 5, 6]
    assert read_cursor(store)[0] == 6


class _WritesOnTicks(DefaultHooks):
    """Writes a marker through the evaluator's connection on every tick, then fails to commit."""

    row_kinds = frozenset({"tick"})

    def due(self) -> bool:
        return True

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None:
        assert conn is not None
        conn.execute("INSERT INTO rule_counters (name, value) VALUES ('probe', 1)")

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        raise RuntimeError("crash before the cursor")


def test_what_hooks_write_on_a_row_is_part_of_the_batch_transaction(tmp_path: Path) -> None:
    store = connect(tmp_path / "store.db")
    insert(store, [row(T0, "restart"), row(T0 + MIN, "tick"), row(T0 + 2 * MIN, "restart")])
    ev = LiveEvaluator(store, [make_rule("r", EVERY_RESTART)], hooks=_WritesOnTicks())
    with pytest.raises(RuntimeError, match="crash before the cursor"):
        ev.step()
    assert store.execute("SELECT count(*) FROM rule_counters WHERE name = 'probe'").fetchone() == (
        0,
    )
    assert store.execute("SELECT count(*) FROM rule_fires").fetchone() == (0,)
    assert read_cursor(store) == (0, 0)


def test_an_evaluator_overtaken_by_another_resumes_from_the_stored_cursor(
    tmp_path: Path,
) -> None:
    store = connect(tmp_path / "store.db")
    rules = [make_rule("r", EVERY_RESTART, cooldown="0s")]
    late = LiveEvaluator(store, rules)
    assert late.step().rows == 0  # restored at cursor 0
    insert(store, [row(T0 + i * MIN, "restart") for i in range(3)])
    assert [f.seq for f in LiveEvaluator(store, rules).run_until_idle()] == [1, 2, 3]
    insert(store, [row(T0 + (5 + i) * MIN, "restart") for i in range(2)])

    fires = late.run_until_idle()

    assert [f.seq for f in fires] == [4, 5]
    assert [f.seq for f in list_fires(store)] == [1, 2, 3, 4, 5]
    assert late.cursor == read_cursor(store)[0] == 5
