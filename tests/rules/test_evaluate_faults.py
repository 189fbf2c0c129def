"""``harness evaluate --follow`` rides out a store fault instead of ending (a real ext4 disk).

Its store's disk answers EIO, then the same bytes are mounted anew: the
command says why on stderr, starts again on a new connection once the store
works, evaluates what was committed meanwhile, and still ends cleanly on
SIGTERM. Before, the first I/O error ended it with a store error.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import engine.journal.schema  # noqa: F401  (the journal's tables for a new store)
from engine.journal.writer import Committer
from engine.store.db import connect
from tests.serve._faultfs import ext4_loop
from tests.serve.conftest import HOLD_RULE, ROOT, serve_env


def forbidden(store: Path, harness: str) -> None:
    """Commit one call of the tool the hold rule forbids, for ``harness``."""
    conn = connect(store, create=not store.exists())
    try:
        row = (0, "run_event", "tool_call", "observer", harness, None, "r1", "Forbidden", "ok")
        Committer(conn, ticks=False).commit_checked([(*row, *[None] * 6)])
    finally:
        conn.close()


def fired_on(store: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT target FROM rule_fires")}
    except sqlite3.Error:
        return set()  # the disk is away, or the tables are not there yet
    finally:
        conn.close()


def wait(what: str, done: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        time.sleep(0.1)


def test_evaluate_follow_rides_out_a_disk_that_goes_and_comes_back(tmp_path: Path) -> None:
    with ext4_loop(tmp_path) as fs:
        store = fs.where / "journal.db"
        forbidden(store, "ev01")
        policy = tmp_path / "policy"
        policy.mkdir()
        (policy / "serve_test_hold.yml").write_text(HOLD_RULE)
        err = tmp_path / "evaluate.err"
        with open(err, "wb") as fh:
            command = ["evaluate", "--follow", "--store", str(store), "--policy", str(policy)]
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cli.harness", *command],
                cwd=ROOT,
                env=serve_env(tmp_path),
                stdout=subprocess.DEVNULL,
                stderr=fh,
            )
        try:
            wait("the first fire", lambda: "ev01" in fired_on(store))
            fs.shutdown()
            wait("the fault said", lambda: "store error:" in err.read_text(errors="replace"))
            assert proc.poll() is None, err.read_text(errors="replace")
            fs.remount_fresh()
            forbidden(store, "ev02")  # committed while the evaluator is still waiting
            wait("the recovery said", lambda: "works again" in err.read_text(errors="replace"))
            wait("the fire after the fault", lambda: "ev02" in fired_on(store))
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
        text = err.read_text(errors="replace")
        assert code == 0, text
        assert "Traceback" not in text
