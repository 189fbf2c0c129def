"""Two processes appending, a reader following, and kill -9 mid-batch."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from engine.journal.reader import read_after
from engine.store.db import connect
from tests.conftest import ROOT


def _spawn(store: Path, name: str, batches: int, size: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.journal._writer_proc", str(store), name, str(batches),
         str(size)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_two_processes_keep_seq_dense_and_each_writer_in_order(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    connect(store).close()
    procs = [_spawn(store, name, 40, 250) for name in ("wa", "wb")]
    # A reader follows seq while both write: every read continues exactly at
    # cursor + 1, so no gap is ever filled in later.
    reader = connect(store, readonly=True)
    cursor = 0
    seen: list[tuple[int, str, str]] = []
    while True:
        running = any(p.poll() is None for p in procs)
        rows = read_after(reader, cursor, 5_000)
        for row in rows:
            assert row[0] == cursor + 1, f"gap after {cursor}: got {row[0]}"
            cursor = row[0]
            seen.append((row[0], row[5], row[7]))
        if not running and not rows:
            break
        time.sleep(0.002)
    for p in procs:
        assert p.wait() == 0, p.stderr.read() if p.stderr else ""
    assert len(seen) == 2 * 40 * 250
    for name in ("wa", "wb"):
        runs = [int(run[1:]) for _seq, h, run in seen if h == name]
        assert runs == list(range(40 * 250)), f"{name} reordered"
    ats = [r[0] for r in sqlite3.connect(store).execute("SELECT at FROM rule_journal ORDER BY seq")]
    assert ats == sorted(ats)


def test_kill_9_mid_batch_leaves_every_committed_row(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    connect(store).close()
    proc = _spawn(store, "wk", 100_000, 2_000)
    assert proc.stdout is not None
    committed = 0
    for line in proc.stdout:
        committed = int(line.split()[1])
        if committed >= 20_000:
            break
    time.sleep(0.05)  # let it get into the next batch
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Lines printed after our read were committed too; count them.
    rest = proc.stdout.read()
    for line in rest.splitlines():
        committed = max(committed, int(line.split()[1]))
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    count, lo, hi = conn.execute("SELECT count(*), min(seq), max(seq) FROM rule_journal").fetchone()
    assert lo == 1 and count == hi, "seq must stay dense"
    assert hi >= committed, "a committed row went missing"
    assert hi % 2_000 == 0, "half a batch is visible"
    runs = [r[0] for r in conn.execute("SELECT run FROM rule_journal ORDER BY seq")]
    assert runs == [f"r{i}" for i in range(hi)]
    # The store is still writable after the crash.
    conn.close()
    from engine.journal.writer import Committer

    result = Committer(connect(store), ticks=False).admit(
        [{"type": "tool_call", "harness": "h1", "tool": "t"}]
    )
    assert result.first_seq == hi + 1


def test_follow_yields_rows_as_another_writer_commits_them(tmp_path: Path) -> None:
    import threading

    from engine.journal.reader import follow
    from engine.journal.writer import Committer

    store = tmp_path / "j.db"
    connect(store).close()

    def write() -> None:
        conn = connect(store)
        c = Committer(conn, ticks=False)
        for i in range(5):
            c.admit([{"type": "tool_call", "harness": f"h{i}", "tool": "t"}] * 3)
            time.sleep(0.02)
        conn.close()

    thread = threading.Thread(target=write)
    thread.start()
    got: list[int] = []
    deadline = time.monotonic() + 10
    reader = connect(store, readonly=True)
    for row in follow(reader, 0, poll_s=0.005, stop=lambda: time.monotonic() > deadline):
        got.append(row[0])
        if len(got) == 15:
            break
    thread.join()
    assert got == list(range(1, 16))
