"""``harness rules list`` and ``show``: loaded rules, state, fires read from the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.cli.harness import main
from engine.store.db import connect

HOUR = 3_600_000
NOW = 1_800_000_000_000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def make_store(path: Path, fires: list[tuple[str, str, int, str]]) -> None:
    """A real store (migrations run) with one journal row at NOW and some fires."""
    conn = connect(path)
    conn.execute(
        "INSERT INTO rule_journal (seq, at, kind, type, source) VALUES (?, ?, ?, ?, ?)",
        (1, NOW, "tick", "tick", "tick"),
    )
    for i, (rule, hash_, at, status) in enumerate(fires, start=1):
        conn.execute(
            "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level,"
            " status, reasons, calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rule, hash_, i, at, "h1", "hold", "notify", status, "[]", "[]"),
        )
    conn.commit()
    conn.close()


def starter_hash(capsys: pytest.CaptureFixture[str], name: str, store: Path) -> str:
    rc, out, _ = run(capsys, "rules", "show", name, "--json", "--store", str(store))
    assert rc == 0
    return str(json.loads(out)["hash"])


def test_list_shows_the_starter_pack_without_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "none.db"
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    assert rc == 0 and not store.exists()  # list never creates a store
    rows = {r["name"]: r for r in json.loads(out)["rules"]}
    assert rows["restart_same_error"]["level"] == "hold"
    assert rows["restart_same_error"]["fires_24h"] == 0
    assert rows["file_collision"]["state"] == "active"
    assert all(len(r["hash"]) == 64 for r in rows.values())
    rc, text, _ = run(capsys, "rules", "list", "--store", str(store))
    assert rc == 0 and "restart_same_error" in text and rows["file_churn"]["hash"][:12] in text


def test_list_counts_fires_in_the_last_24h_of_journal_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "j.db"
    make_store(
        store,
        [
            ("restart_same_error", "x", NOW - 1 * HOUR, "fired"),
            ("restart_same_error", "x", NOW - 23 * HOUR, "shadow"),
            ("restart_same_error", "x", NOW - 25 * HOUR, "fired"),
            ("file_churn", "y", NOW - 2 * HOUR, "fired"),
        ],
    )
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    rows = {r["name"]: r for r in json.loads(out)["rules"]}
    assert rc == 0
    assert rows["restart_same_error"]["fires_24h"] == 2
    assert rows["file_churn"]["fires_24h"] == 1
    assert rows["loop_guard_repeated"]["fires_24h"] == 0


def test_list_reports_disabled_and_enforced_from_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "harness.toml"
    cfg.write_text(
        '[memory.rules]\nenforce = ["restart_same_error@abcd"]\ndisable = ["file_churn"]\n'
    )
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(tmp_path / "n.db"))
    rows = {r["name"]: r for r in json.loads(out)["rules"]}
    assert rc == 0
    assert rows["file_churn"]["state"] == "disabled"
    assert rows["restart_same_error"]["enforced"] is True
    assert rows["loop_guard_repeated"]["enforced"] is False


def test_policy_dir_overrides_a_starter_rule_and_load_errors_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pol = tmp_path / "pol"
    pol.mkdir()
    (pol / "collide.yml").write_text(
        "name: file_collision\non: graph_event\nwhen: event.type == 'collision'\n"
        "level: notify\ntarget: path\n"
    )
    (pol / "broken.yml").write_text("name: broken\non: tick\nwhen: event.nope\n")
    rc, out, _ = run(
        capsys, "rules", "list", "--json", "--policy", str(pol), "--store", str(tmp_path / "n.db")
    )
    data = json.loads(out)
    rows = {r["name"]: r for r in data["rules"]}
    assert rc == 0
    assert rows["file_collision"]["level"] == "notify"
    assert rows["file_collision"]["source_kind"] == "policy"
    assert "broken" not in rows
    assert any(e["file"].endswith("broken.yml") for e in data["errors"])


def test_show_prints_source_normalized_when_hash_cost_primitives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "n.db"
    rc, out, _ = run(capsys, "rules", "show", "restart_same_error", "--json", "--store", str(store))
    data = json.loads(out)
    assert rc == 0
    assert data["source_text"].startswith("name: restart_same_error")
    assert data["normalized_when"].startswith('event.type == "restart" && ')
    assert data["static_cost"] >= 100
    assert data["primitives"] == [
        {
            "index": 0,
            "fn": "count",
            "field": None,
            "selector_keys": ["harness", "type", "cause_digest"],
            "window": "1h",
        }
    ]
    assert data["hash_changed_since_last_acted"] is False and data["last_fires"] == []
    rc, text, _ = run(capsys, "rules", "show", "restart_same_error", "--store", str(store))
    assert rc == 0 and data["hash"] in text and "count({harness, type, cause_digest}, 1h)" in text


def test_show_marks_a_hash_change_since_the_rule_last_acted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "j.db"
    make_store(store, [])
    current = starter_hash(capsys, "loop_guard_repeated", store)
    conn = sqlite3.connect(store)
    rows = [
        ("loop_guard_repeated", "0" * 64, NOW - 3 * HOUR, "fired"),
        ("loop_guard_repeated", current, NOW - 1 * HOUR, "shadow"),  # shadow never acted
    ]
    for i, (rule, h, at, status) in enumerate(rows, start=10):
        conn.execute(
            "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level,"
            " status, reasons, calls) VALUES (?, ?, ?, ?, 'h1', 'notify', 'notify', ?, '[]', '[]')",
            (rule, h, i, at, status),
        )
    conn.commit()
    conn.close()
    rc, out, _ = run(
        capsys, "rules", "show", "loop_guard_repeated", "--json", "--store", str(store)
    )
    data = json.loads(out)
    assert rc == 0 and data["hash_changed_since_last_acted"] is True
    assert data["last_acted_hash"] == "0" * 64
    assert [f["status"] for f in data["last_fires"]] == ["shadow", "fired"]
    rc, text, _ = run(capsys, "rules", "show", "loop_guard_repeated", "--store", str(store))
    assert "CHANGED since it last acted" in text


def test_show_unknown_rule_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "rules", "show", "no_such_rule", "--store", str(tmp_path / "n.db"))
    assert rc == 2 and "no_such_rule" in err


def test_store_without_fire_tables_is_read_defensively(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "odd.db"
    sqlite3.connect(store).execute("CREATE TABLE unrelated (x)").connection.commit()
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    assert rc == 0 and all(r["fires_24h"] == 0 for r in json.loads(out)["rules"])


def test_bad_policy_dir_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, "rules", "list", "--policy", str(tmp_path / "missing"))
    assert rc == 2 and "missing" in err


def test_list_shows_a_disabled_rules_error_only_for_the_version_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "j.db"
    make_store(store, [])
    current = starter_hash(capsys, "file_churn", store)
    conn = sqlite3.connect(store)
    conn.executemany(
        "INSERT INTO rule_state (name, hash, state, error, updated_at) VALUES (?, ?, ?, ?, 0)",
        [
            ("file_churn", current, "disabled", "cost limit exceeded"),
            ("loop_guard_repeated", "0" * 64, "disabled", "old version broke"),
        ],
    )
    conn.commit()
    conn.close()
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    rows = {r["name"]: r for r in json.loads(out)["rules"]}
    assert rc == 0
    assert (rows["file_churn"]["state"], rows["file_churn"]["error"]) == (
        "disabled",
        "cost limit exceeded",
    )
    assert (rows["loop_guard_repeated"]["state"], rows["loop_guard_repeated"]["error"]) == (
        "active",
        None,
    )
    rc, text, _ = run(capsys, "rules", "list", "--store", str(store))
    assert "error: cost limit exceeded" in text and "old version broke" not in text
