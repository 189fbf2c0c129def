"""``harness journal …`` and ``harness demo`` from the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from engine.cli.harness import main
from engine.store.db import connect
from tests.journal._util import all_rows

DIGEST = "sha256:" + "0" * 64


def run(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        stdin: str = "") -> tuple[int, str, str]:  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_append_admits_good_lines_and_refuses_bad_ones_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    lines = "\n".join(
        [
            json.dumps({"type": "tool_call", "harness": "h1", "tool": "bash"}),
            json.dumps({"type": "tool_call", "harness": "h1", "tool": "bash", "path": "a\tb"}),
            "",
            "{not json",
            json.dumps({"type": "restart", "harness": "h2", "cause_digest": DIGEST}),
        ]
    )
    code, out, err = run(["journal", "append", "--store", str(store)], capsys, monkeypatch, lines)
    assert code == 1
    assert "<stdin>:2: refused: path:" in err
    assert "<stdin>:4: refused: row: not JSON" in err
    assert "admitted 2 row(s), refused 2" in out
    rows = all_rows(connect(store))
    assert [r[3] for r in rows] == ["tool_call", "restart"]
    code, out, _ = run(["journal", "stats", "--store", str(store), "--json"], capsys, monkeypatch)
    stats = json.loads(out)
    assert code == 0 and stats["refused"] == 2 and stats["rows"] == 2
    assert stats["by_type"]["run_event"] == {"restart": 1, "tool_call": 1}


def test_append_all_good_exits_zero_with_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    line = json.dumps({"type": "fact_added", "fact": "fact:x/1", "n": 2})
    code, out, _ = run(
        ["journal", "append", "--store", str(store), "--json"], capsys, monkeypatch, line + "\n"
    )
    assert code == 0
    assert json.loads(out) == {"ok": True, "admitted": 1, "ticks": 0, "refused": []}


def _write(path: Path, rows: list[object]) -> None:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")


def test_import_is_all_or_nothing_and_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    src = tmp_path / "hist.jsonl"
    good = {"type": "tool_call", "harness": "h1", "tool": "bash"}
    _write(src, [{**good, "at": 1000}, {**good, "at": 2000}, {**good, "at": 1500}])
    code, _, err = run(["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch)
    assert code == 2
    assert f"{src}:3: error: at:" in err and "nothing was imported" in err
    assert all_rows(connect(store)) == []
    _write(src, [{**good, "at": 1000}, {**good, "at": 2000, "tool": "two words"}])
    code, _, err = run(["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch)
    assert code == 2 and f"{src}:2: error: tool:" in err
    assert all_rows(connect(store)) == []
    _write(src, [{**good, "at": 1000}, "", {**good, "at": 200_000}])
    code, out, _ = run(
        ["journal", "import", str(src), "--store", str(store), "--ticks", "--json"],
        capsys,
        monkeypatch,
    )
    summary = json.loads(out)
    assert code == 0 and summary["admitted"] == 2 and summary["ticks"] == 3
    assert [r[1] for r in all_rows(connect(store))] == [1000, 60000, 120000, 180000, 200000]


def test_import_of_a_missing_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(
        ["journal", "import", str(tmp_path / "nope.jsonl"), "--store", str(tmp_path / "j.db")],
        capsys,
        monkeypatch,
    )
    assert code == 2 and "nope.jsonl: error: cannot read" in err


def test_tail_prints_the_last_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    lines = "".join(
        json.dumps({"type": "tool_call", "harness": f"h{i}", "tool": "bash"}) + "\n"
        for i in range(30)
    )
    run(["journal", "append", "--store", str(store)], capsys, monkeypatch, lines)
    code, out, _ = run(["journal", "tail", "--store", str(store), "-n", "3", "--json"], capsys,
                       monkeypatch)  # fmt: skip
    got = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [g["harness"] for g in got] == ["h27", "h28", "h29"]
    assert [g["seq"] for g in got] == [28, 29, 30]
    code, out, _ = run(["journal", "tail", "--store", str(store), "-n", "2"], capsys, monkeypatch)
    assert out.splitlines()[-1].split()[0] == "30" and "harness=h29" in out


def test_tail_and_stats_on_a_missing_store_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(["journal", "stats", "--store", str(tmp_path / "none.db")], capsys,
                       monkeypatch)  # fmt: skip
    assert code == 2 and "no store here" in err


def test_prune_uses_the_configured_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "j.db"
    day = 86_400_000
    src = tmp_path / "h.jsonl"
    _write(src, [{"type": "tool_call", "harness": "h1", "tool": "t", "at": d * day}
                 for d in range(1, 11)])  # fmt: skip
    run(["journal", "import", str(src), "--store", str(store)], capsys, monkeypatch)
    cfg = tmp_path / "harness.toml"
    cfg.write_text("[store]\nretention_days = 3\n")
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    code, out, _ = run(["journal", "prune", "--store", str(store), "--json"], capsys, monkeypatch)
    result = json.loads(out)
    assert code == 0 and result["days"] == 3 and result["deleted"] == 6
    code, out, _ = run(["journal", "prune", "--store", str(store), "--days", "1", "--json"],
                       capsys, monkeypatch)  # fmt: skip
    assert json.loads(out)["deleted"] == 2


def test_demo_writes_a_history_ending_now_and_refuses_a_used_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "demo.db"
    code, out, _ = run(["demo", "--store", str(store), "--days", "1", "--harnesses", "4",
                        "--json"], capsys, monkeypatch)  # fmt: skip
    summary = json.loads(out)
    assert code == 0 and summary["rows"] > 10_000
    conn = connect(store)
    types = {r[0] for r in conn.execute("SELECT DISTINCT type FROM rule_journal")}
    assert {"tool_call", "run_started", "file_edited", "tick", "collision"} <= types
    code, _, err = run(["demo", "--store", str(store), "--days", "1"], capsys, monkeypatch)
    assert code == 2 and "use a new --store" in err
