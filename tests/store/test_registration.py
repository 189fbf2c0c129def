"""The store receives its schema by registration and never imports the packages above it."""

from __future__ import annotations

import ast
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store import migrations
from engine.store.db import connect
from engine.store.migrations import Migration, MigrationError, migrate, register_migration
from engine.views.store_schema import FULL_SCHEMA, register_full_schema
from tests.conftest import ROOT

#: The store may use the foundations that import nothing of the engine: errors, Record and
#: capped (whose ``path_refusal`` the store asks before opening a path).
ALLOWED_BELOW_STORE = ("engine.store", "engine.errors", "engine.record", "engine.capped")
#: The program's latest schema version: whatever the full schema ends with.
LATEST = FULL_SCHEMA[-1].version


def _engine_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n == "engine" or n.startswith("engine.")]


def test_store_modules_import_nothing_above_the_store() -> None:
    for path in (ROOT / "engine" / "store").glob("*.py"):
        for name in _engine_imports(path):
            assert name.startswith(ALLOWED_BELOW_STORE), f"{path.name} imports {name}"


def test_importing_the_store_loads_no_owning_package() -> None:
    code = (
        "import sys, engine.store.db, engine.store.migrations\n"
        "print(sorted(m for m in sys.modules if m.startswith(('engine.journal', "
        "'engine.rules', 'engine.policy'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_full_schema_keeps_the_shipped_versions() -> None:
    assert [(m.version, m.name) for m in FULL_SCHEMA][:6] == [
        (1, "journal"),
        (2, "rules"),
        (3, "lifecycle"),
        (4, "proposals"),
        (5, "run_stops"),
        (6, "prefilter_index"),
    ]
    assert [m.version for m in FULL_SCHEMA] == list(range(1, LATEST + 1))
    assert register_full_schema() == LATEST
    assert migrations.registered() == FULL_SCHEMA


def test_registering_again_is_a_no_op_and_a_different_step_is_refused() -> None:
    first = FULL_SCHEMA[0]
    assert register_migration(first.version, first.name, first.sql) == first
    with pytest.raises(MigrationError, match="already registered as 'journal'"):
        register_migration(1, "journal", first.sql + "; CREATE TABLE x (a)")
    with pytest.raises(MigrationError, match="start at 1"):
        register_migration(0, "zero", "")


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("old_version", range(1, LATEST + 1))
def test_an_existing_store_at_each_shipped_version_migrates_unchanged(
    tmp_path: Path, old_version: int
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, FULL_SCHEMA[:old_version]) == old_version
    conn.execute("INSERT INTO rule_journal (at, kind, type, source, harness) "
                 "VALUES (1, 'run_event', 'tool_call', 'observer', 'h1')")  # fmt: skip
    conn.close()
    reopened = connect(path)
    try:
        assert migrations.current_version(reopened) == LATEST
        assert {"rule_journal", "rule_fires", "rule_holds", "rule_proposals"} <= _tables(reopened)
        assert reopened.execute("SELECT COUNT(*) FROM rule_journal").fetchone()[0] == 1
    finally:
        reopened.close()


def test_a_fresh_store_gets_the_same_tables_as_the_old_fixed_list(tmp_path: Path) -> None:
    conn = connect(tmp_path / "new.db")
    try:
        assert migrations.current_version(conn) == LATEST
        by_steps = sqlite3.connect(":memory:", isolation_level=None)
        migrate(by_steps, FULL_SCHEMA)
        assert _tables(conn) == _tables(by_steps)
    finally:
        conn.close()


def test_a_newer_store_is_refused_once_the_full_schema_is_registered(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    with pytest.raises(Exception, match="newer than this program knows"):
        connect(path).close()


def test_a_gap_in_the_steps_stops_there(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert migrate(conn, (FULL_SCHEMA[0], FULL_SCHEMA[2])) == 1
    assert "rule_fires" not in _tables(conn)


def test_a_process_with_only_the_journal_registered_creates_and_reuses_stores(
    tmp_path: Path,
) -> None:
    """Outside the full program, the journal's own opener registers its table and no more."""
    full = tmp_path / "full.db"
    connect(full).close()
    code = (
        "import sys\n"
        "from engine.journal.queue import JournalWriter\n"
        "from engine.store import migrations\n"
        "from engine.store.db import connect\n"
        "print([m.name for m in migrations.registered()])\n"
        f"new = connect({str(tmp_path / 'journal-only.db')!r})\n"
        "print(migrations.current_version(new))\n"
        f"old = connect({str(full)!r})\n"  # a full store is used as it is, not refused
        "print(migrations.current_version(old))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:3] == ["['journal']", "1", str(LATEST)]


def test_creating_a_store_with_nothing_registered_is_a_clear_error(tmp_path: Path) -> None:
    code = (
        "from engine.store.migrations import migrate\n"
        "import sqlite3\n"
        "migrate(sqlite3.connect(':memory:', isolation_level=None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert "no schema migration is registered" in out.stderr


def test_migration_is_a_value() -> None:
    # A Record: its fields are Final (mypy refuses assignment), it compares and hashes by value.
    step = Migration(1, "journal", "x")
    assert step == Migration(1, "journal", "x") and step != Migration(2, "journal", "x")
    assert len({step, Migration(1, "journal", "x")}) == 1
    assert repr(step) == "Migration(version=1, name='journal', sql='x')"
