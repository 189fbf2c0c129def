"""The live evaluator: fires with the cursor, restarts, disabled rules, store errors, hooks."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.config import RulesConfig
from engine.rules.evaluation.evaluator import RowEvaluator, fast_host_for
from engine.rules.evaluation.fires import Fire, list_fires
from engine.rules.evaluation.hooks import DefaultHooks, FireDecision, RowView
from engine.rules.evaluation.host_sql import SqlHost
from engine.rules.evaluation.live_evaluator import LiveEvaluator, read_cursor
from engine.rules.language.loader import compile_rule_text
from engine.rules.language.model import CompiledRule, EvalResult, Rule
from engine.store.db import connect

INSERT = (
    "INSERT INTO rule_journal (at, kind, type, source, harness, project, run, tool,"
    " outcome, path, cause_digest, args_digest, other_harness, fact, n)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
CAUSE = "sha256:" + "ab" * 32
T0 = 1_767_225_600_000
MIN = 60_000


def make_rule(
    name: str,
    when: str,
    *,
    on: str = "run_event",
    level: str = "notify",
    target: str = "harness",
    cooldown: str = "1m",
    config: RulesConfig | None = None,
) -> CompiledRule:
    text = (
        f"name: {name}\non: {on}\nwhen: {json.dumps(when)}\nlevel: {level}\n"
        f"target: {target}\ncooldown: {cooldown}\nmessage: m\n"
    )
    compiled, errors = compile_rule_text(text, f"{name}.yml", "file", config or RulesConfig())
    assert compiled is not None, [str(e) for e in errors]
    return compiled


RESTART_RULE = (
    'event.type == "restart" && count({"harness": event.harness, "type": "restart",'
    ' "cause_digest": event.cause_digest}, duration("1h")) >= 3'
)


def row(at: int, typ: str, harness: str = "h1", **kw: Any) -> tuple[Any, ...]:
    kind = kw.pop("kind", "tick" if typ == "tick" else "run_event")
    cols = ("project", "run", "tool", "outcome", "path", "cause_digest", "args_digest",
            "other_harness", "fact", "n")  # fmt: skip
    source = "tick" if kind == "tick" else "observer"
    return (at, kind, typ, source, None if kind == "tick" else harness,
            *(kw.get(c) for c in cols))  # fmt: skip


def insert(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    conn.executemany(INSERT, rows)


@pytest.fixture
def store(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "store.db")


def test_fire_is_stored_with_calls_level_reasons_and_the_cursor(store: sqlite3.Connection) -> None:
    rule = make_rule("restart_same_error", RESTART_RULE, level="hold")
    insert(store, [row(T0 + i * MIN, "restart", cause_digest=CAUSE) for i in range(3)])
    insert(store, [row(T0 + 4 * MIN, "tool_call", tool="bash")])
    ev = LiveEvaluator(store, [rule])
    fires = ev.run_until_idle()
    assert [(f.rule, f.seq, f.target) for f in fires] == [("restart_same_error", 3, "h1")]
    stored = store.execute(
        "SELECT rule, hash, seq, at, target, level, effective_level, status, reasons, calls"
        " FROM rule_fires"
    ).fetchall()
    assert len(stored) == 1
    name, hash_, seq, at, target, level, eff, status, reasons, calls = stored[0]
    assert (name, hash_, seq, at, target) == (
        "restart_same_error",
        rule.rule.hash,
        3,
        T0 + 2 * MIN,
        "h1",
    )
    assert (level, eff, status) == ("hold", "notify", "fired")
    assert any("not enforced" in r for r in json.loads(reasons))
    assert json.loads(calls) == [
        {
            "fn": "count",
            "field": None,
            "selector": {"cause_digest": CAUSE, "harness": "h1", "type": "restart"},
            "window_ms": 3_600_000,
            "result": 3,
        }
    ]
    assert read_cursor(store) == (4, T0 + 4 * MIN)


class _FailingCommit(DefaultHooks):
    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        raise RuntimeError("crash between fires and cursor")


def test_fires_and_cursor_commit_together_or_not_at_all(store: sqlite3.Connection) -> None:
    rule = make_rule("r", RESTART_RULE)
    insert(store, [row(T0 + i * MIN, "restart", cause_digest=CAUSE) for i in range(4)])
    with pytest.raises(RuntimeError):
        LiveEvaluator(store, [rule], hooks=_FailingCommit()).step()
    assert store.execute("SELECT count(*) FROM rule_fires").fetchone()[0] == 0
    assert read_cursor(store) == (0, 0)
    fires = LiveEvaluator(store, [rule]).run_until_idle()
    assert [f.seq for f in fires] == [3, 4]
    assert [f.seq for f in list_fires(store)] == [3, 4]


def test_a_restarted_evaluator_resumes_with_a_warm_window_and_no_duplicates(
    tmp_path: Path,
) -> None:
    rule = make_rule("r", RESTART_RULE)
    rows = [row(T0 + i * 7 * MIN, "restart", cause_digest=CAUSE) for i in range(12)]
    rows += [row(T0 + i * 7 * MIN + 1, "tool_call") for i in range(12)]
    rows.sort(key=lambda r: r[0])
    one = connect(tmp_path / "one.db")
    insert(one, rows)
    expected = [f.key() for f in LiveEvaluator(one, [rule]).run_until_idle()]
    assert len(expected) >= 5

    split = connect(tmp_path / "split.db")
    got: list[Any] = []
    for start in range(0, len(rows), 5):  # a new evaluator (a restart) every 5 rows
        insert(split, rows[start : start + 5])
        got.extend(f.key() for f in LiveEvaluator(split, [rule], batch_size=2).run_until_idle())
    assert got == expected
    assert [f.key() for f in list_fires(split)] == expected


def test_an_erroring_rule_is_disabled_alone_and_stays_disabled_until_edited(
    store: sqlite3.Connection,
) -> None:
    good = make_rule("good", RESTART_RULE)
    bad = make_rule("bad", 'event.type == "restart" && int(event.path) > 0')
    rows = [row(T0 + i * MIN, "restart", cause_digest=CAUSE, path="12") for i in range(2)]
    rows += [row(T0 + (2 + i) * MIN, "restart", cause_digest=CAUSE, path="x.py") for i in range(3)]
    insert(store, rows)
    fires = LiveEvaluator(store, [good, bad]).run_until_idle()
    assert [(f.rule, f.seq) for f in fires] == [
        ("bad", 1),
        ("bad", 2),
        ("good", 3),
        ("good", 4),
        ("good", 5),
    ]
    state = store.execute("SELECT state, error, error_seq FROM rule_state WHERE name = 'bad'")
    st, error, error_seq = state.fetchone()
    assert st == "disabled" and error_seq == 3 and error
    assert (
        store.execute("SELECT state FROM rule_state WHERE name = 'good'").fetchone()[0] == "active"
    )
    assert (
        store.execute("SELECT value FROM rule_counters WHERE name = 'rule_errors'").fetchone()[0]
        == 1
    )

    insert(store, [row(T0 + 9 * MIN, "restart", cause_digest=CAUSE, path="7")])
    again = LiveEvaluator(store, [good, bad])
    assert [f.rule for f in again.run_until_idle()] == ["good"]  # bad stays disabled
    assert "bad" in again.disabled

    edited = make_rule("bad", 'event.type == "restart" && int(event.path) > 1')
    insert(store, [row(T0 + 10 * MIN, "restart", cause_digest=CAUSE, path="8")])
    fresh = LiveEvaluator(store, [good, edited])
    assert sorted(f.rule for f in fresh.run_until_idle()) == ["bad", "good"]
    assert (
        store.execute("SELECT state FROM rule_state WHERE name = 'bad'").fetchone()[0] == "active"
    )


def _fake(rule: Rule, result: EvalResult) -> CompiledRule:
    return CompiledRule(rule, lambda event, now, host: result)


def test_budget_exhaustion_disables_with_its_error(store: sqlite3.Connection) -> None:
    base = make_rule("spender", 'event.type == "restart"').rule
    spender = _fake(base, EvalResult(False, (), 10_100, "cost limit exceeded"))
    insert(store, [row(T0, "restart"), row(T0 + 1, "restart")])
    ev = LiveEvaluator(store, [spender])
    ev.run_until_idle()
    assert ev.disabled == {"spender": "cost limit exceeded"}
    assert store.execute("SELECT error FROM rule_state WHERE name='spender'").fetchone()[0] == (
        "cost limit exceeded"
    )


def test_a_store_read_failure_is_a_store_error_not_a_rule_error(
    store: sqlite3.Connection, tmp_path: Path
) -> None:
    rule = make_rule("r", RESTART_RULE)
    insert(store, [row(T0 + i, "restart", cause_digest=CAUSE) for i in range(3)])
    broken = sqlite3.connect(tmp_path / "elsewhere.db")
    broken.close()

    class BrokenSql(SqlHost):
        pass

    ev = LiveEvaluator(store, [rule], host_factory=lambda rules: BrokenSql(broken))
    res = ev.step()
    assert res.rows == 3 and res.fires == ()
    assert [s.seq for s in res.store_errors] == [1, 2, 3]
    assert ev.disabled == {}
    assert store.execute("SELECT count(*) FROM rule_store_errors").fetchone()[0] == 3
    assert (
        store.execute("SELECT value FROM rule_counters WHERE name='store_errors'").fetchone()[0]
        == 3
    )
    # The same rows through a working SQL host fire normally.
    fine = RowEvaluator([rule], SqlHost(store))
    from engine.rules.evaluation.window import ROW_SELECT

    out = [
        f for r in store.execute(ROW_SELECT + " ORDER BY seq").fetchall() for f in fine.process(r)
    ]
    assert [f.seq for f in out] == [3]


class Recorder:
    """Hooks that record every call, to check order and transaction state."""

    row_kinds: frozenset[str] | None = frozenset({"tick"})

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        self.calls.append(("on_match", rule.name, row["seq"], now_ms))
        return FireDecision("shadow", "annotate", ("recorded",))

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None:
        assert conn is None or conn.in_transaction
        self.calls.append(("on_row", row["kind"], row["seq"]))

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        assert conn is not None and conn.in_transaction
        assert all(f.id is not None for f in fires)
        self.calls.append(("before_commit", [f.seq for f in fires]))

    def after_commit(self, fires: Sequence[Fire]) -> None:
        self.calls.append(("after_commit", [f.id for f in fires]))


def test_fire_hooks_run_in_order_and_only_an_acting_evaluator_acts(
    store: sqlite3.Connection,
) -> None:
    rule = make_rule("r", RESTART_RULE)
    insert(store, [row(T0, "restart", cause_digest=CAUSE), row(T0 + 1, "tick")])
    insert(store, [row(T0 + 2 + i, "restart", cause_digest=CAUSE) for i in range(2)])
    rec = Recorder()
    fires = LiveEvaluator(store, [rule], hooks=rec).run_until_idle()
    assert [(f.status, f.effective_level, f.reasons) for f in fires] == [
        ("shadow", "annotate", ("recorded",))
    ]
    assert rec.calls == [
        ("on_row", "tick", 2),
        ("on_match", "r", 4, T0 + 3),
        ("before_commit", [4]),
        ("after_commit", [fires[0].id]),
    ]
    follower_store = store
    insert(follower_store, [row(T0 + 9, "restart", cause_digest=CAUSE)])
    rec2 = Recorder()
    follower = LiveEvaluator(follower_store, [rule], hooks=rec2, acting=False)
    assert len(follower.run_until_idle()) == 1
    assert [c[0] for c in rec2.calls] == ["on_match", "before_commit"]  # never after_commit


def test_rows_failing_a_static_guard_are_never_evaluated(store: sqlite3.Connection) -> None:
    rule = make_rule("r", RESTART_RULE)
    rows = [row(T0 + i, "tool_call", tool="bash") for i in range(500)]
    rows += [row(T0 + 600 + i, "restart", cause_digest=CAUSE) for i in range(4)]
    insert(store, rows)
    core = RowEvaluator([rule], fast_host_for([rule]))
    from engine.rules.evaluation.window import ROW_SELECT

    fires = [f for r in store.execute(ROW_SELECT + " ORDER BY seq") for f in core.process(r)]
    # CEL runs on the restarts whose count gate passes (>= 3 in the window): the last two.
    assert core.evaluations == 2
    assert [f.seq for f in fires] == [503, 504]
    ungated = RowEvaluator([rule], fast_host_for([rule]), use_gates=False)
    again = [f for r in store.execute(ROW_SELECT + " ORDER BY seq") for f in ungated.process(r)]
    assert ungated.evaluations == 4  # the guard alone leaves the four restarts to CEL
    assert [f.key() for f in again] == [f.key() for f in fires]


def test_default_hooks_never_grant_hold_or_stop() -> None:
    hooks = DefaultHooks()
    for level, expected in (
        ("annotate", "annotate"),
        ("notify", "notify"),
        ("hold", "notify"),
        ("stop", "notify"),
    ):
        rule = make_rule("x", 'event.type == "a"', level=level).rule
        decision = hooks.on_match(rule, "h", {}, 0)
        assert (decision.status, decision.effective_level) == ("fired", expected)
        assert bool(decision.reasons) == (level in ("hold", "stop"))


def test_harness_evaluate_runs_headless_from_the_cursor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli.harness import main as harness

    path = tmp_path / "cli.db"
    conn = connect(path)
    insert(conn, [row(T0 + i * MIN, "restart", cause_digest=CAUSE) for i in range(4)])
    broken = tmp_path / "policy"
    broken.mkdir()
    (broken / "broken.yml").write_text("name: broken\non: run_event\nwhen: event.nope\n")
    code = harness(["evaluate", "--store", str(path), "--json", "--policy", str(broken)])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert code == 0
    assert "rule not loaded" in captured.err and "broken.yml" in captured.err
    assert (summary["rows"], summary["cursor"], summary["acting"]) == (4, 4, True)
    fires = list_fires(conn)
    # Through the lifecycle: the second match falls inside the 30m cooldown.
    assert [(f.rule, f.seq, f.status) for f in fires] == [
        ("restart_same_error", 3, "fired"),
        ("restart_same_error", 4, "suppressed"),
    ]
    assert summary["fires"] == 2
    insert(conn, [row(T0 + 5 * MIN, "tool_call", tool="bash")])
    assert harness(["evaluate", "--store", str(path)]) == 0
    assert "evaluated 1 row(s)" in capsys.readouterr().out


def test_harness_evaluate_follow_prints_fires_as_rows_commit_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    import os
    import select
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "follow.db"
    conn = connect(path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.harness", "evaluate", "--follow", "--json",
         "--store", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ},
    )  # fmt: skip
    try:
        time.sleep(0.5)
        for i in range(3):  # committed one by one while the evaluator follows
            insert(conn, [row(T0 + i * MIN, "restart", cause_digest=CAUSE)])
            time.sleep(0.05)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no fire printed within 30 s"
        line = proc.stdout.readline()
        fire = json.loads(line)
        assert (fire["rule"], fire["seq"], fire["status"]) == ("restart_same_error", 3, "fired")
        assert fire["id"] == conn.execute("SELECT id FROM rule_fires").fetchone()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0
    assert read_cursor(conn)[0] == 3


def test_an_absent_target_field_reads_empty_and_an_int_target_as_digits(
    store: sqlite3.Connection,
) -> None:
    by_n = make_rule("by_n", 'event.type == "restart"', target="n")
    by_path = make_rule("by_path", 'event.type == "restart"', target="path")
    insert(store, [row(T0, "restart"), row(T0 + 1, "restart", n=7, path="a.py")])
    fires = LiveEvaluator(store, [by_n, by_path]).run_until_idle()
    assert sorted((f.rule, f.seq, f.target) for f in fires) == [
        ("by_n", 1, ""),
        ("by_n", 2, "7"),
        ("by_path", 1, ""),
        ("by_path", 2, "a.py"),
    ]


def test_evaluate_with_a_missing_policy_dir_is_exit_2(tmp_path: Path) -> None:
    from engine.cli.harness import main as harness_main

    assert harness_main(["evaluate", "--store", str(tmp_path / "j.db"), "--policy", "/nope"]) == 2


def test_oversize_rule_file_in_a_dir_is_refused_without_reading_it(tmp_path: Path) -> None:
    from engine.config import RulesConfig
    from engine.rules.language.loader import load_rules
    from engine.yamlsrc import MAX_BYTES

    big = tmp_path / "big.yml"
    with open(big, "wb") as fh:
        fh.truncate(MAX_BYTES + 10)  # sparse: costs no disk, would cost memory if read
    result = load_rules([(tmp_path, "policy")], RulesConfig())
    assert result.rules == ()
    assert any("limit" in d.message and d.location.file == str(big) for d in result.errors)
