"""Regression tests for the bad-input review of ``harness holds`` and ``harness rules``.

Each test feeds input a reviewer found mishandled: a supervisor gate told
"free" for a store that does not exist, numbers that overflowed SQLite,
missing policy dirs ignored in silence, a corrupt store shown as 0 fires,
and unreadable lint input reported as a rule error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.cli.harness import main
from engine.config import load_config
from engine.rules.doctor import run_doctor
from engine.store.db import connect

GOOD = """\
name: bad_input_ok
on: graph_event
when: 'event.type == "churn" && count({"path": event.path}, duration("1h")) > 2'
level: notify
target: path
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; argparse usage errors come back as their exit code."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def write_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    cfg = tmp_path / "harness.toml"
    cfg.write_text(text)
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    return cfg


# --- 1. holds check / list never say "free" for a store that is not there -----------------


def test_check_with_a_missing_named_store_is_exit_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "typo.db"
    rc, out, err = run(capsys, "holds", "check", "h1", "--store", str(store))
    assert rc == 2 and "no store here" in err and "free" not in out
    rc, _, err = run(capsys, "holds", "list", "--store", str(store))
    assert rc == 2 and "no store here" in err
    assert not store.exists()


def test_check_with_an_empty_store_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "empty.db"
    store.touch()
    rc, _, err = run(capsys, "holds", "check", "h1", "--store", str(store), "--json")
    assert rc == 2 and "empty" in err
    assert store.stat().st_size == 0  # not migrated into a store


def test_check_with_a_missing_configured_store_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, monkeypatch, f'[store]\npath = "{tmp_path / "gone.db"}"\n')
    rc, _, err = run(capsys, "holds", "check", "h1")
    assert rc == 2 and "[store] path" in err


@pytest.mark.parametrize("command", [("check", "h1"), ("list",)])
def test_no_store_anywhere_is_exit_2_naming_the_path_never_free(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    # A supervisor gating on `holds check` must not read a missing store as "free".
    rc, out, err = run(capsys, "holds", *command)
    assert rc == 2 and out == ""
    assert "no store here" in err and "journal.db" in err


def test_check_on_a_real_store_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    connect(store).close()
    rc, out, _ = run(capsys, "holds", "check", "h1", "--store", str(store))
    assert rc == 0 and "h1" in out


@pytest.mark.parametrize("bad", ["", "h 01", "x" * 5000, "h\n1", "é"])
def test_check_refuses_an_id_outside_the_journal_shape(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = run(capsys, "holds", "check", bad)
    assert rc == 2 and "HARNESS" in err and out == ""


# --- 2. numbers out of range are usage errors naming the flag ------------------------------

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["rules", "explain", HUGE], "FIRE_ID"),
        (["rules", "explain", "0"], "FIRE_ID"),
        (["holds", "release", HUGE], "HOLD_ID"),
        (["holds", "release", "-5"], "HOLD_ID"),
        (["rules", "backtest", "x", "--since", "99999999999999999h"], "--since"),
        (["rules", "backtest", "x", "--until", "99999999999999999h"], "--until"),
        (["rules", "backtest", "x", "--until", HUGE], "--until"),
        (["rules", "backtest", "x", "--from-seq", HUGE], "--from-seq"),
        (["rules", "mine", "--since", "99999999999999999h"], "--since"),
        (["rules", "propose", "f.yml", "--days", "99999999999999"], "--days"),
        (["rules", "propose", "f.yml", "--days", "0"], "--days"),
    ],
)
def test_out_of_range_numbers_are_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and f"argument {flag}" in err


def test_in_range_durations_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli.options import span, until

    assert span("3650d") == "3650d" and until("24h") == "24h" and until("17") == "17"
    assert until("2026-01-31T12:00:00Z") == "2026-01-31T12:00:00Z"


# --- 3. configured / given policy dirs that are missing are reported ------------------------


def test_rules_list_warns_about_a_missing_policy_repo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, monkeypatch, f'[policy_repo.team]\npath = "{tmp_path / "nope"}"\n')
    rc, out, _ = run(capsys, "rules", "list", "--json")
    assert rc == 0
    [warning] = json.loads(out)["warnings"]
    assert warning["path"] == "policy_repo.team.path" and "does not exist" in warning["message"]
    rc, _, err = run(capsys, "rules", "list")
    assert rc == 0 and "warning: policy repo `team`" in err


def test_lint_warns_about_a_policy_repo_without_rules_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo").mkdir()
    write_config(tmp_path, monkeypatch, f'[policy_repo.team]\npath = "{tmp_path / "repo"}"\n')
    rc, out, _ = run(capsys, "rules", "lint", "--json")
    assert rc == 0
    assert any("no rules/ directory" in w["message"] for w in json.loads(out)["warnings"])


def test_backtest_with_a_missing_policy_dir_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    connect(store).close()
    rc, _, err = run(
        capsys, "rules", "backtest", "restart_same_error", "--policy", "nope", "--store", str(store)
    )
    assert rc == 2 and "--policy" in err


def test_doctor_reports_a_policy_rule_file_that_fails_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "repo" / "rules"
    rules.mkdir(parents=True)
    (rules / "broken.yml").write_text("name: [\n")
    (rules / "fine.yml").write_text(GOOD)
    write_config(tmp_path, monkeypatch, f'[policy_repo.team]\npath = "{tmp_path / "repo"}"\n')
    report = run_doctor(tmp_path / "none.db", config_loader=load_config)
    [check] = [c for c in report.checks if c.name == "rule files"]
    assert check.status == "error" and not report.ok
    assert any("broken.yml:2:1" in item for item in check.items)


# --- 4. a corrupt or missing store is said, not shown as 0 fires -----------------------------


def test_rules_list_on_a_corrupt_store_shows_unknown_fires(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "corrupt.db"
    store.write_bytes(b"this is not sqlite" * 100)
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    data = json.loads(out)
    assert rc == 0
    assert all(r["fires_24h"] is None for r in data["rules"])
    assert any(w["code"] == "store" for w in data["warnings"])
    rc, out, err = run(capsys, "rules", "list", "--store", str(store))
    assert rc == 0 and "cannot read the store" in err
    assert " ?  " in out.splitlines()[1]


def test_rules_list_warns_for_a_missing_named_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "typo.db"
    rc, out, _ = run(capsys, "rules", "list", "--json", "--store", str(store))
    assert rc == 0 and not store.exists()
    assert any("no store here" in w["message"] for w in json.loads(out)["warnings"])


def test_rules_show_on_a_corrupt_store_has_no_fire_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "corrupt.db"
    store.write_bytes(b"\x01" * 4096)
    rc, out, err = run(
        capsys, "rules", "show", "restart_same_error", "--json", "--store", str(store)
    )
    data = json.loads(out)
    assert rc == 0 and data["last_fires"] is None and data["warnings"]
    assert "cannot read the store" in err


# --- 5. lint: unreadable named input is one more error result (exit 1), the rest is linted ---
# (issue 13, items 10 and 14: CI on a policy repo must still get its text, JSON or SARIF)


@pytest.mark.parametrize(
    "content", [b"name: x\x00\x01\x02", b"name: caf\xe9\n"], ids=["binary", "latin1"]
)
def test_lint_of_an_undecodable_file_is_a_located_error(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.yml"
    path.write_bytes(content)
    rc, out, _ = run(capsys, "rules", "lint", str(path))
    assert rc == 1 and f"{path}:1:" in out


def test_lint_of_an_oversize_file_is_an_error_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.yml"
    path.write_bytes(b"#" * (4 * 1024 * 1024 + 10))
    rc, out, _ = run(capsys, "rules", "lint", str(path))
    assert rc == 1 and "larger than" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_lint_of_a_fifo_or_device_is_an_error_result_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)
    rc, out, _ = run(capsys, "rules", "lint", str(fifo))
    assert rc == 1 and "not a regular file" in out
    rc, out, _ = run(capsys, "rules", "lint", "/dev/null")
    assert rc == 1 and "not a regular file" in out


def test_lint_of_a_missing_file_in_json_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(capsys, "rules", "lint", str(tmp_path / "nonexist.yml"), "--format", "json")
    data = json.loads(out)
    assert rc == 1 and data["ok"] is False
    assert data["errors"][0]["file"].endswith("nonexist.yml")


def test_lint_keeps_exit_1_for_rule_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.yml"
    path.write_text(GOOD.replace("level: notify", "level: loud"))
    rc, out, _ = run(capsys, "rules", "lint", str(path))
    assert rc == 1 and "r.yml:4" in out and "level" in out


def test_lint_of_an_empty_directory_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, out, _ = run(capsys, "rules", "lint", str(empty))
    assert rc == 0 and f"no rule files in {empty}" in out
    (empty / "ok.yml").write_text(GOOD)
    rc, out, _ = run(capsys, "rules", "lint", str(empty))
    assert rc == 0 and "no rule files" not in out
