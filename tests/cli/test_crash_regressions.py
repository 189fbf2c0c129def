"""Fuzz-found CLI crashes and exit-code rules (issue 13), end to end in-process.

Each test is one repro from the issue: the input used to end in a Python
traceback (or a lost batch, or a silent exit 0) and must now end in a located
message with the documented exit code.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path

import pytest

from engine.cli.harness import main as harness
from engine.cli.skillspec import main as skillspec
from engine.store.db import connect
from tests.journal._util import all_rows

RULE = """\
name: {name}
on: run_event
when: event.type == "restart"
level: notify
target: harness
cooldown: {cooldown}
"""
SPEC = """\
schema: skillspec/v0
id: crash.demo
title: Crash demo
description: A small valid spec.
routes:
  - id: local
    label: Local
rules:
  - id: r
    when:
      user_says_any: [agent]
    prefer: local
"""


def run(
    main: object, argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    import sys

    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv)  # type: ignore[operator]
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


def counters(db: Path) -> dict[str, int]:
    conn = connect(db)
    try:
        return {k: int(v) for k, v in conn.execute("SELECT name, value FROM journal_counters")}
    finally:
        conn.close()


# -- items 1-4: journal append --------------------------------------------------------------

GOOD = '{"type": "tool_call", "harness": "h", "tool": "t"}\n'


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"type":"tool_call","harness":{}}', "harness:"),
        ('{"type":"run_finished","harness":"h","run":"r","outcome":[]}', "outcome:"),
        ("[" * 10_000 + "]" * 10_000, "row: nested deeper"),
        ('{"type":"tool_call","harness":"h","tool":"t","n":' + "9" * 5000 + "}", "row: integer"),
    ],
    ids=["dict", "list", "deep", "long_int"],
)
def test_append_refuses_hostile_lines_and_admits_the_good_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, needle: str
) -> None:
    db = tmp_path / "j.db"
    rc, out, err = run(
        harness, ["journal", "append", "--store", str(db)], capsys, GOOD + line + "\n" + GOOD
    )
    assert rc == 1 and "Traceback" not in err
    assert f"<stdin>:2: refused: {needle}" in err
    assert "admitted 2 row(s), refused 1" in out
    assert counters(db)["refused"] == 1


def test_append_json_echoes_a_lone_surrogate_key_as_valid_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(
        harness,
        ["journal", "append", "--store", str(tmp_path / "j.db"), "--json"],
        capsys,
        '{"\\ud800": []}\n',
    )
    assert rc == 1
    out.encode("utf-8")
    assert json.loads(out)["refused"][0]["field"] == "'\\ud800'"  # its repr: plain ASCII


def test_a_bug_on_one_line_keeps_the_good_lines_and_counts_the_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.journal.writer as writer

    real = writer.parse_json_row

    def flaky(line: str, file: str, lineno: int, *, with_at: bool) -> object:
        if lineno == 3:
            raise KeyError("a bug nobody foresaw")
        return real(line, file, lineno, with_at=with_at)

    monkeypatch.setattr(writer, "parse_json_row", flaky)
    db = tmp_path / "j.db"
    rc, _, err = run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD * 4)
    assert rc == 70 and "internal error" in err and "KeyError" in err
    conn = connect(db)
    try:
        assert sum(1 for r in all_rows(conn) if r[3] == "tool_call") == 2
    finally:
        conn.close()
    assert counters(db)["refused"] == 1


# -- items 2, 3: decide --inputs ---------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "needle"),
    [("[" * 10_000 + "]" * 10_000, "nested deeper"), ("9" * 5000, "digits")],
    ids=["deep", "long_int"],
)
def test_decide_inputs_refuses_hostile_lines_at_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, needle: str
) -> None:
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(SPEC)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"agent"\n' + line + "\n")
    rc, _, err = run(skillspec, ["decide", str(spec), "--inputs", str(inputs), "--json"], capsys)
    assert rc == 2 and f"{inputs}:2" in err and needle in err and "Traceback" not in err


def test_decide_inputs_json_writes_a_lone_surrogate_as_an_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(SPEC)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text('"\\udfff"\n"agent"\n')
    rc, out, _ = run(skillspec, ["decide", str(spec), "--inputs", str(inputs), "--json"], capsys)
    assert rc == 0
    first, second = (json.loads(x) for x in out.splitlines())
    assert first["input"] == "\udfff" and second["route"] == "local"


# -- item 8: one bad rule file in evaluate --policy DIR ---------------------------------


def test_evaluate_keeps_going_when_one_policy_rule_overflows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "bad.yml").write_text(RULE.format(name="bad_one", cooldown="9" * 400 + "d"))
    (policy / "good.yml").write_text(RULE.format(name="good_one", cooldown="5m"))
    db = tmp_path / "j.db"
    run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD)
    rc, out, err = run(
        harness, ["evaluate", "--store", str(db), "--policy", str(policy), "--json"], capsys
    )
    assert rc == 0, err
    assert f"{policy / 'bad.yml'}:6:" in err and "cooldown" in err
    assert json.loads(out)["rules"] == 7  # six starter rules and good_one


# -- item 9: store faults ---------------------------------------------------------------


def garbled_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = tmp_path / "g.db"
    run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD * 50)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(db, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * 4096)
    return db


def test_a_corrupt_store_is_named_in_every_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = garbled_store(tmp_path, capsys)
    for argv in (["journal", "stats"], ["evaluate"], ["journal", "tail"]):
        rc, _, err = run(harness, [*argv, "--store", str(db)], capsys)
        assert rc == 2 and str(db) in err, (argv, err)
    rc, _, err = run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD)
    assert rc == 2 and str(db) in err


def test_doctor_summarises_a_corrupt_store_and_keeps_the_detail_for_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.db"
    run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD * 2000)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = db.stat().st_size
    with open(db, "r+b") as fh:  # damage index and table pages, keep the header
        for offset in range(3 * 4096, size, 4 * 4096):
            fh.seek(offset + 100)
            fh.write(os.urandom(600))
    rc, out, _ = run(harness, ["doctor", "--store", str(db)], capsys)
    assert rc == 1 and len(out.splitlines()) < 25, out
    rc, verbose, _ = run(harness, ["doctor", "--store", str(db), "--verbose"], capsys)
    assert rc == 1 and len(verbose) >= len(out)


def test_tail_of_a_garbled_row_is_a_bad_store_not_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "t.db"
    run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE rule_journal SET harness = x'00ff' WHERE type = 'tool_call'")
    conn.commit()
    conn.close()
    rc, _, err = run(harness, ["journal", "tail", "--store", str(db)], capsys)
    assert rc == 2 and str(db) in err and "garbled" in err


# -- item 10: lint with an unreadable file among others ------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_lint_reports_unreadable_files_as_results_and_lints_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    good = tmp_path / "good.yml"
    good.write_text(RULE.format(name="good_one", cooldown="5m"))
    binary = tmp_path / "bin.yml"
    binary.write_bytes(b"name: x\x00\x01")
    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)
    missing = tmp_path / "missing.yml"
    argv = ["rules", "lint", str(binary), str(good), str(fifo), str(missing), "--format", fmt]
    rc, out, _ = run(harness, argv, capsys)
    assert rc == 1
    if fmt == "text":
        for p in (binary, fifo, missing):
            assert f"{p}" in out
        assert "1 rule(s) loaded, 3 error(s)" in out
    elif fmt == "json":
        data = json.loads(out)
        assert [r["name"] for r in data["rules"]] == ["good_one"]
        assert {e["file"] for e in data["errors"]} == {str(binary), str(fifo), str(missing)}
    else:
        results = json.loads(out)["runs"][0]["results"]
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
        assert uris == {str(binary), str(fifo), str(missing)}


# -- item 14: exit codes -----------------------------------------------------------------


def test_a_spec_that_parses_badly_is_invalid_exit_1_and_an_unreadable_one_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "skill.spec.yml"
    for text in (b"a: [\n", b"\xef\xbb\xbf" + SPEC.encode(), b"a: !!int abc\n", b"id: caf\xe9\n"):
        bad.write_bytes(text)
        for argv in (["validate"], ["imports", "check"], ["decide", "--input", "x"]):
            rc, out, err = run(
                skillspec,
                [*argv[:2], str(bad), *argv[2:]]
                if argv[0] == "imports"
                else [argv[0], str(bad), *argv[1:]],
                capsys,
            )
            assert rc == 1, (text, argv, out, err)
            assert f"{bad}:" in out + err and "Traceback" not in err
    rc, _, err = run(skillspec, ["validate", str(tmp_path / "absent.yml")], capsys)
    assert rc == 2 and "cannot read" in err
    rc, _, err = run(skillspec, ["validate", str(tmp_path)], capsys)
    assert rc == 2


def test_a_rule_file_that_parses_badly_is_exit_1_and_a_missing_one_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("name: [\n")
    db = tmp_path / "j.db"
    run(harness, ["journal", "append", "--store", str(db)], capsys, GOOD)
    rc, _, err = run(harness, ["rules", "backtest", str(bad), "--store", str(db)], capsys)
    assert rc == 1 and f"{bad}:2:1" in err
    rc, _, err = run(
        harness, ["rules", "backtest", str(tmp_path / "no.yml"), "--store", str(db)], capsys
    )
    assert rc == 2


# -- the last resort: internal error with an id, never silent --------------------------------


def test_a_bug_is_an_internal_error_with_an_id_and_exit_70(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.skillspec.load as load

    def boom(*_a: object, **_k: object) -> object:
        raise OverflowError("a bug nobody foresaw")

    monkeypatch.setattr(load, "check_spec", boom)
    spec = tmp_path / "skill.spec.yml"
    spec.write_text(SPEC)
    monkeypatch.delenv("HARNESS_TRACEBACK", raising=False)
    rc, _, err = run(skillspec, ["validate", str(spec)], capsys)
    assert rc == 70 and "internal error: OverflowError (id " in err and "Traceback" not in err
    monkeypatch.setenv("HARNESS_TRACEBACK", "1")
    rc, _, err2 = run(skillspec, ["validate", str(spec)], capsys)
    assert rc == 70 and "Traceback" in err2
    assert err.split("(id ")[1][:8] == err2.split("(id ")[1][:8]  # the same bug, the same id
