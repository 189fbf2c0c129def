"""Serve when its store's file goes away: a disk remounted, the file removed or replaced.

DESIGN "The gate's guarantees". Ways the gate could be fooled, the first two
seen on a real ext4 loop device:

- A read connection opened before the fault goes on reading the old file's
  cached pages, without an error, after the same bytes are mounted anew: the
  gate, on such a thread, missed a hold stored after the disk came back.
- A writer that opens the store anew while the disk is away would create an
  empty store in the bare mount point and acknowledge rows into it, rows
  hidden (lost) once the disk is mounted again.
- SQLite in WAL mode commits into a store file that was removed, or replaced
  by a restored backup, without an error: rows acknowledged then were in no
  file at the store's path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.config_text import parse_config
from engine.journal.errors import StoreUnavailable
from engine.journal.rows import row_from_mapping
from engine.rules.language.loader import load_rules
from engine.serve.metrics import ServeMetrics
from engine.serve.runtime import ServeRuntime
from tests.serve._faultfs import ext4_loop
from tests.serve.conftest import CONFIG, HOLD_RULE

HARNESS = "remount01"


@contextlib.contextmanager
def running(tmp_path: Path, store: Path) -> Iterator[ServeRuntime]:
    """Serve's runtime on ``store`` with the hold rule enforced, started, closed after."""
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "serve_test_hold.yml").write_text(HOLD_RULE)
    config = parse_config(CONFIG)
    loaded = load_rules([(policy, "policy")], config.rules)
    assert not loaded.errors, loaded.errors
    runtime = ServeRuntime(store, config, loaded.rules, ServeMetrics())
    runtime.start()
    try:
        yield runtime
    finally:
        runtime.close()


def call(runtime: ServeRuntime, tool: str, timeout: float = 20.0) -> None:
    """Journal one tool call, retrying while serve answers "not stored" (as a client would)."""
    row = row_from_mapping({"type": "tool_call", "harness": HARNESS, "tool": tool}, with_at=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            runtime.journal.acknowledge(runtime.journal.submit([row]))
            return
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stored_holds(store: Path) -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        query = "SELECT count(*) FROM rule_holds WHERE harness = ? AND released_at IS NULL"
        return int(conn.execute(query, (HARNESS,)).fetchone()[0])
    finally:
        conn.close()


def wait_stored_hold(store: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not stored_holds(store):
        assert time.monotonic() < deadline, f"no hold stored within {timeout:g}s"
        time.sleep(0.05)


def test_the_gate_sees_a_hold_stored_after_the_disk_came_back(tmp_path: Path) -> None:
    with ext4_loop(tmp_path) as fs:
        store = fs.where / "journal.db"
        with running(tmp_path, store) as runtime:
            call(runtime, "Read")
            gate = runtime.hooks.gate
            before, _ = gate.state(HARNESS, None, gated=True)  # this thread's reader opens
            assert before.holds == ()

            fs.shutdown()
            fs.remount_fresh()
            call(runtime, "Forbidden")  # fails on the dead disk, then the writer reopens
            wait_stored_hold(store)  # the evaluator, idle through the fault, reopened too

            after, _ = gate.state(HARNESS, None, gated=True)
            assert [h.rule for h in after.holds] == ["serve_test_hold"]
            assert runtime.writer.reopened >= 1


def test_a_writer_never_creates_the_store_while_its_disk_is_away(tmp_path: Path) -> None:
    with ext4_loop(tmp_path) as fs:
        store = fs.where / "journal.db"
        with running(tmp_path, store) as runtime:
            call(runtime, "Read")
            fs.shutdown()
            fs.unmount()
            try:
                call(runtime, "Write", timeout=1.5)
            except StoreUnavailable as exc:
                refused = str(exc)
            else:
                refused = ""
            assert refused, "a row was acknowledged while the store's disk was away"
            assert not store.exists(), "the writer made a new store in the bare mount point"
            assert "cannot write the store" in (runtime.writer.failure or "")

            fs.mount_fresh()
            call(runtime, "Edit")
            conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
            try:
                tools = [r[0] for r in conn.execute("SELECT tool FROM rule_journal ORDER BY seq")]
            finally:
                conn.close()
            assert "Edit" in tools and "Read" in tools and "Write" not in tools


def stored_tools(store: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT tool FROM rule_journal ORDER BY seq")]
    finally:
        conn.close()


def remove_store(store: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)


def test_rows_go_to_the_file_at_the_store_path_never_to_a_removed_one(tmp_path: Path) -> None:
    store = tmp_path / "journal.db"
    with running(tmp_path, store) as runtime:
        call(runtime, "Read")
        backup = tmp_path / "backup.db"
        with sqlite3.connect(store) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        gate = runtime.hooks.gate
        gate.state(HARNESS, None, gated=True)  # this thread's reader opens the first file

        # A backup restored over the store, at once: rows after it are in the restored file.
        restored = tmp_path / "restored.db"
        shutil.copyfile(backup, restored)
        remove_store(store)
        os.replace(restored, store)
        call(runtime, "Write")
        assert stored_tools(store)[-1] == "Write"
        assert runtime.writer.reopened >= 1

        # The store removed: nothing is acknowledged until a store is back at the path.
        remove_store(store)
        with pytest.raises(StoreUnavailable):
            call(runtime, "Gone", timeout=1.5)
        assert not store.exists(), "serve made a new store"
        assert runtime.writer.failure is not None
        healthy, details = runtime.health()
        assert not healthy and "cannot write the store" in str(details["writer"])

        shutil.copyfile(backup, store)
        call(runtime, "Edit")
        tools = stored_tools(store)
        assert "Edit" in tools and "Gone" not in tools
        newest = runtime.reader().execute("SELECT tool FROM rule_journal ORDER BY seq DESC")
        assert newest.fetchone()[0] == "Edit"  # this thread's reader left the first file
