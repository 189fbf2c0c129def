"""Read-your-writes: the gate waits until the evaluator saw a harness's rows, after restarts too."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from engine.journal.queue import JournalWriter
from engine.journal.writer import Committer
from engine.serve.adapters import Watermark, WatermarkGate, WriterJournal
from engine.store.db import connect


def store_with_rows(tmp_path: Path, n: int) -> Path:
    store = tmp_path / "j.db"
    conn = connect(store)
    rows = [(0, "run_event", "tool_call", "observer", "h1", None, "r", "Bash", "ok", *[None] * 6)]
    Committer(conn, ticks=False).commit_checked(rows * n)
    conn.close()
    return store


def gate_for(store: Path, watermark: Watermark, wait_s: float) -> WatermarkGate:
    journal = WriterJournal(JournalWriter(store, ticks=False))
    reader = sqlite3.connect(f"file:{store}?mode=ro", uri=True, check_same_thread=False)
    return WatermarkGate(journal, watermark, lambda: reader, lambda: True, wait_s)


def test_an_unknown_harness_waits_for_everything_committed_before_the_restart(
    tmp_path: Path,
) -> None:
    store = store_with_rows(tmp_path, 5)  # acknowledged before a restart, not yet evaluated
    watermark = Watermark()
    gate = gate_for(store, watermark, wait_s=5.0)
    threading.Timer(0.2, watermark.advance, (5,)).start()
    started = time.monotonic()
    _state, late = gate.state("h1", "r", gated=True)
    waited = time.monotonic() - started
    assert late is False and waited >= 0.15  # it waited for the evaluator, then answered


def test_past_gate_wait_the_answer_comes_late_and_says_so(tmp_path: Path) -> None:
    store = store_with_rows(tmp_path, 3)
    gate = gate_for(store, Watermark(), wait_s=0.05)
    _state, late = gate.state("h1", "r", gated=True)
    assert late is True


def test_a_harness_whose_rows_were_evaluated_does_not_wait(tmp_path: Path) -> None:
    store = store_with_rows(tmp_path, 3)
    watermark = Watermark()
    watermark.advance(3)
    gate = gate_for(store, watermark, wait_s=5.0)
    started = time.monotonic()
    assert gate.state("h1", "r", gated=True)[1] is False
    assert time.monotonic() - started < 1.0


def test_a_moment_that_is_not_gated_reads_the_stop_as_it_is_without_waiting(
    tmp_path: Path,
) -> None:
    store = store_with_rows(tmp_path, 3)
    gate = gate_for(store, Watermark(), wait_s=5.0)  # the evaluator never catches up
    started = time.monotonic()
    _state, late = gate.state("h1", "r", gated=False)
    assert late is False and time.monotonic() - started < 1.0


def test_a_lingering_evaluator_steps_as_soon_as_a_gate_waits() -> None:
    """The evaluator's linger under load never delays a gate: a waiter ends it at once."""
    watermark = Watermark()
    lingered: list[float] = []

    def evaluator() -> None:
        started = time.monotonic()
        watermark.linger(30.0)
        lingered.append(time.monotonic() - started)
        watermark.advance(7)  # the step after the linger

    thread = threading.Thread(target=evaluator)
    thread.start()
    time.sleep(0.1)
    assert not lingered, "linger returned with nobody waiting"
    assert watermark.wait_for(7, 30.0)
    thread.join(5.0)
    assert lingered and lingered[0] < 10.0

    # A gate already waiting: the evaluator does not linger at all.
    waiting = threading.Thread(target=watermark.wait_for, args=(8, 30.0))
    waiting.start()
    while not watermark._waiters:  # the registered waiter is the point
        time.sleep(0.01)
    started = time.monotonic()
    watermark.linger(30.0)
    assert time.monotonic() - started < 10.0
    watermark.advance(8)
    waiting.join(5.0)
    assert not waiting.is_alive()


def test_a_watermark_already_reached_registers_no_waiter() -> None:
    watermark = Watermark()
    watermark.advance(3)
    assert watermark.wait_for(2, 0.0)
    started = time.monotonic()
    watermark.linger(0.2)  # nobody waits: the full linger
    assert time.monotonic() - started >= 0.15
