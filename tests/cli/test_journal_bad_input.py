"""Regression tests for the bad-input review: journal, store paths, demo.

Each test feeds one kind of hostile or broken input (endless lines, rows from
the future, store paths that cannot work, a held write lock, absurd numbers)
and checks the command stops with a located message and exit 2, leaving the
store as it was.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.cli.harness import main
from engine.errors import InputError
from engine.journal.rows import row_from_mapping
from engine.journal.writer import Committer, wall_clock_ms
from engine.store.db import connect
from tests.journal._util import all_rows

YEAR_MS = 365 * 86_400_000
ROW = {"type": "tool_call", "harness": "h1", "tool": "bash"}


def run(
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def history_line(at: int) -> str:
    return json.dumps({"at": at, **ROW}) + "\n"


def row_count(path: Path) -> int:
    conn = connect(path)
    try:
        return len(all_rows(conn))
    finally:
        conn.close()


# -- 1. endless / huge input ------------------------------------------------


def test_append_stops_at_an_endless_line_and_keeps_the_rows_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    stdin = json.dumps(ROW) + "\n" + "\0" * 300_000
    code, _, err = run(["journal", "append", "--store", str(store)], capsys, monkeypatch, stdin)
    assert code == 2
    assert "<stdin>:2: error: row: line longer than 64 KiB" in err
    assert "1 row(s) before it were admitted" in err and "Traceback" not in err
    assert row_count(store) == 1


def test_a_line_of_exactly_64_kib_is_still_read_as_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap is on the line, not on a well-formed row's neighbours."""
    store = tmp_path / "j.db"
    body = json.dumps(ROW)
    padded = body[:-1] + " " * (65_536 - len(body)) + "}"
    assert len(padded) == 65_536
    code, out, _ = run(
        ["journal", "append", "--store", str(store)], capsys, monkeypatch, padded + "\n"
    )
    assert code == 0 and "admitted 1 row(s)" in out


def test_import_refuses_a_device_and_an_endless_stdin_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    code, _, err = run(
        ["journal", "import", "/dev/zero", "--store", str(store)], capsys, monkeypatch
    )
    assert code == 2 and "/dev/zero: error: not a regular file" in err
    stdin = history_line(1_000) + "x" * 200_000
    code, _, err = run(
        ["journal", "import", "-", "--store", str(store)], capsys, monkeypatch, stdin
    )
    assert code == 2 and "<stdin>:2: error: row: line longer than 64 KiB" in err
    assert "nothing was imported" in err
    assert row_count(store) == 0


def test_import_refuses_an_oversize_file_before_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text(history_line(1_000) * 50)
    monkeypatch.setattr("engine.journal.lines.MAX_IMPORT_BYTES", 1_000)
    code, _, err = run(
        ["journal", "import", str(big), "--store", str(tmp_path / "j.db")], capsys, monkeypatch
    )
    assert code == 2 and f"{big}: error: file is" in err and "1,000 limit" in err


# -- 2. rows from the future ------------------------------------------------


def test_import_refuses_a_row_from_the_future_and_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    now = wall_clock_ms()
    src = tmp_path / "h.jsonl"
    src.write_text(history_line(now - 60_000) + history_line(now + 100 * YEAR_MS))
    code, _, err = run(["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch)
    assert code == 2
    assert f"{src}:2: error: at:" in err and "in the future" in err
    assert row_count(store) == 0
    # Within the documented skew (5 minutes) is still history, not the future.
    src.write_text(history_line(now - 60_000) + history_line(now + 60_000))
    code, _, _ = run(["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch)
    assert code == 0 and row_count(store) == 2


def test_prune_refuses_a_journal_whose_last_at_is_in_the_future(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    now = wall_clock_ms()
    conn = connect(store)
    committer = Committer(conn)
    rows = [
        row_from_mapping({"at": at, **ROW}, with_at=True)
        for at in (now - 2 * 86_400_000, now + 100 * YEAR_MS)
    ]
    committer.import_history(rows, validate=False)
    conn.close()
    code, _, err = run(["journal", "prune", "--store", str(store)], capsys, monkeypatch)
    assert code == 2 and "in the future" in err and "nothing was pruned" in err
    assert row_count(store) == 2


# -- 3. store paths -----------------------------------------------------------


def _bad_paths(tmp: Path) -> list[tuple[Path | str, dict[str, Any], str]]:
    (tmp / "afile").write_text("x")
    (tmp / "random.db").write_bytes(os.urandom(4096))
    (tmp / "text.db").write_text("hello\n" * 200)
    (tmp / "empty.db").write_bytes(b"")
    return [
        (tmp / "afile" / "x.db", {}, "afile is not a directory"),
        ("/proc/self/no-such-dir/x.db", {}, "cannot create the store directory"),
        ("/proc/x.db", {}, "cannot open or create the store here"),
        ("~nouser-zz9/x.db", {}, "cannot expand ~nouser-zz9"),
        (tmp / "random.db", {"readonly": True}, "not a store"),
        (tmp / "text.db", {"readonly": True}, "not a store"),
        (tmp / "random.db", {}, "not a store"),
        (tmp / "empty.db", {"readonly": True}, "no store here: the file is empty, not a store"),
        (tmp / "empty.db", {"create": False}, "no store here"),
        (tmp / "missing.db", {"create": False}, "no store here"),
        (tmp, {"readonly": True}, "it is a directory"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_store_path_problems_are_input_errors_that_create_nothing(
    tmp_path: Path, case: int
) -> None:
    path, kwargs, expected = _bad_paths(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError) as info:
        connect(path, **kwargs)
    assert expected in str(info.value) and info.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    if (tmp_path / "empty.db").exists():
        assert (tmp_path / "empty.db").stat().st_size == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_a_readonly_open_in_a_readonly_directory_is_a_clear_error(tmp_path: Path) -> None:
    sub = tmp_path / "ro"
    sub.mkdir()
    connect(sub / "j.db").close()
    sub.chmod(0o555)
    try:
        with pytest.raises(InputError) as info:
            connect(sub / "j.db", readonly=True)
        assert "read-only" in str(info.value)
    finally:
        sub.chmod(0o755)


def test_prune_of_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "sub" / "none.db"
    code, _, err = run(["journal", "prune", "--store", str(store)], capsys, monkeypatch)
    assert code == 2 and "no store here" in err
    assert not (tmp_path / "sub").exists()


# -- 4. a held write lock -----------------------------------------------------


def test_a_locked_store_says_store_busy_and_how_many_rows_were_not_admitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    connect(store).close()
    monkeypatch.setattr("engine.store.db.BUSY_TIMEOUT_MS", 50)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        stdin = json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n"
        code, _, err = run(["journal", "append", "--store", str(store)], capsys, monkeypatch, stdin)
        assert code == 2 and "store busy" in err and "2 checked row(s)" in err
        src = tmp_path / "h.jsonl"
        src.write_text(history_line(1_000))
        code, _, err = run(
            ["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch
        )
        assert code == 2 and "store busy" in err and "nothing was imported" in err
        assert "Traceback" not in err
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert row_count(store) == 0


# -- 5. tail -n ---------------------------------------------------------------


@pytest.mark.parametrize("n", ["99999999999999999999", "-5", "0", "1000001"])
def test_tail_n_out_of_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, n: str
) -> None:
    store = tmp_path / "j.db"
    run(["journal", "append", "--store", str(store)], capsys, monkeypatch, json.dumps(ROW))
    code, out, err = run(["journal", "tail", "--store", str(store), f"-n={n}"], capsys, monkeypatch)
    assert code == 2 and "argument -n:" in err and out == ""


# -- 6. harness demo ----------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [["--days", "0"], ["--days", "366"], ["--days", "9" * 20], ["--harnesses", "0"],
     ["--harnesses", "201"], ["--harnesses", "-3"]],
)  # fmt: skip
def test_demo_out_of_range_sizes_are_usage_errors_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
) -> None:  # fmt: skip
    code, _, err = run(["demo", "--store", str(tmp_path / "d.db"), *flags], capsys, monkeypatch)
    assert code == 2 and "must be between" in err
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_demo_leaves_no_store_and_no_temp_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.fleet.sim as sim

    real = sim.write_fleet

    def interrupted(conn: Any, **kwargs: Any) -> Any:
        def stop(_done: int) -> None:
            raise KeyboardInterrupt

        return real(conn, **{**kwargs, "on_batch": stop})

    monkeypatch.setattr(sim, "write_fleet", interrupted)
    code, _, _ = run(
        ["demo", "--store", str(tmp_path / "d.db"), "--days", "1", "--harnesses", "2"],
        capsys,
        monkeypatch,
    )
    assert code == 130
    assert list(tmp_path.iterdir()) == []


def test_demo_fills_an_empty_file_and_names_times_when_refusing_a_used_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "d.db"
    store.write_bytes(b"")
    argv = ["demo", "--store", str(store), "--days", "1", "--harnesses", "2", "--json"]
    code, out, _ = run(argv, capsys, monkeypatch)
    assert code == 0 and json.loads(out)["rows"] == row_count(store)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.db"]
    code, _, err = run(argv[:-1], capsys, monkeypatch)
    assert code == 2 and "Store not empty" in err
    assert " ms" not in err and "T00:00:00Z" in err
