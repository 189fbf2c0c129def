"""Action argv templates: no shell, placeholders in one pass, timeout, at most once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.rules.authority.actions import (
    ActionRequest,
    ActionRunner,
    action_for,
    actions_for_fire,
    render_argv,
    render_message,
)
from engine.store.db import connect


def req(fire_id: int = 7, action: str = "notify", **kw: str) -> ActionRequest:
    base = {
        "rule": "restart_same_error",
        "harness": "h1",
        "target": "h1",
        "level": "notify",
        "message": "h1 keeps restarting",
    }
    base.update(kw)
    return ActionRequest(fire_id=fire_id, action=action, **base)


def recorder(tmp_path: Path) -> tuple[str, ...]:
    script = tmp_path / "rec.py"
    out = tmp_path / "out.jsonl"
    script.write_text(
        "import json, sys\n"
        f"open({str(out)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(int(sys.argv[1]) if sys.argv[1:2] and sys.argv[1].isdigit() else 0)\n"
    )
    return (sys.executable, str(script))


def test_placeholders_fill_once_and_shell_syntax_stays_literal(tmp_path: Path) -> None:
    argv = render_argv(
        ["x", "{rule}:{harness}", "{message}", "{fire_id}", "{unknown}"],
        req(message="$(rm -rf /) {rule}; `id`").values(),
    )
    assert argv == ("x", "restart_same_error:h1", "$(rm -rf /) {rule}; `id`", "7", "{unknown}")
    rec = recorder(tmp_path)
    conn = connect(tmp_path / "s.db")
    out = ActionRunner(conn, {"notify": (*rec, "{message}", "{level}")}).run(
        req(message="$(touch pwned) | cat")
    )
    assert out is not None and out.status == "ok" and out.exit_status == 0
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == ["$(touch pwned) | cat", "notify"]
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()


def test_outcome_is_recorded_and_a_second_run_is_refused(tmp_path: Path) -> None:
    rec = recorder(tmp_path)
    conn = connect(tmp_path / "s.db")
    runner = ActionRunner(conn, {"stop": (*rec, "3", "{harness}")})
    first = runner.run(req(action="stop", level="stop"))
    assert first is not None and first.status == "failed" and first.exit_status == 3
    again = runner.run(req(action="stop", level="stop"))
    assert again is not None and again.status == "skipped"
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 1
    [rec_row] = actions_for_fire(conn, 7)
    assert rec_row.status == "failed" and rec_row.exit_status == 3
    assert rec_row.finished_at is not None and rec_row.argv[-1] == "h1"


def test_unconfigured_action_records_nothing(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    assert ActionRunner(conn, {}).run(req()) is None
    assert actions_for_fire(conn, 7) == []


def test_missing_executable_and_timeout_are_errors_not_crashes(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    missing = ActionRunner(conn, {"notify": ("/nonexistent/notify-x", "{rule}")}).run(req(1))
    assert missing is not None and missing.status == "error"
    assert missing.error is not None and "cannot execute" in missing.error
    slow = ActionRunner(
        conn, {"notify": (sys.executable, "-c", "import time; time.sleep(5)")}, timeout_s=0.3
    ).run(req(2))
    assert slow is not None and slow.status == "error" and "timed out" in (slow.error or "")
    assert slow.finished_at - slow.started_at < 3000


def test_a_started_action_without_outcome_is_described_as_lost(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    conn.execute(
        "INSERT INTO rule_actions (fire_id, action, argv, status, started_at) "
        "VALUES (9, 'stop', '[\"x\"]', 'started', 1)"
    )
    [row] = actions_for_fire(conn, 9)
    assert "no outcome" in row.describe() and "never retried" in row.describe()
    runner = ActionRunner(conn, {"stop": ("true",)})
    assert runner.run(req(9, action="stop")).status == "skipped"  # type: ignore[union-attr]


def test_level_to_action_and_message_rendering() -> None:
    assert [action_for(level) for level in ("annotate", "notify", "hold", "stop")] == [
        None,
        "notify",
        "notify",
        "stop",
    ]
    row = {"harness": "h1", "cause_digest": None}
    assert render_message("{harness} into {cause_digest} {nope}", row) == "h1 into  {nope}"
