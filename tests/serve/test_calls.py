"""One row per real call: how the call book matches reports of the two sources, and what it keeps.

And the verdicts, rendered in each agent's dialect: a stopped ``PreToolUse``
is denied *and* ends the loop (``continue: false`` alone let Claude Code run
the tool first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.journal.writer import Committer
from engine.rules.authority.holds import Hold
from engine.rules.authority.stops import RunStop
from engine.serve.calls import HOOK, MATCH_WINDOW_MS, OTLP, CallBook, ToolReport
from engine.serve.derive import Deriver
from engine.serve.ports import GateState
from engine.serve.recall import StoreRecall
from engine.store.db import connect
from tests.serve._rig import Rig
from tests.serve.conftest import fixture


def report(source: str, call_id: str | None, args: str | None = "sha256:" + "a" * 64, *,
           tool: str = "Bash", outcome: str = "ok") -> ToolReport:  # fmt: skip
    return ToolReport(source, "h1", None, "r1", tool, outcome, args, None, (), call_id)


def rows(book: CallBook, *reports: ToolReport, now: int = 1) -> list[int]:
    """How many rows each report produced (0: a duplicate)."""
    return [len(book.call(r, now).rows) for r in reports]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (report(HOOK, "call_1"), report(OTLP, "call_1", "sha256:" + "b" * 64), True),  # by id
        (report(HOOK, "call_1"), report(OTLP, "call_2"), False),  # both have ids: ids decide
        (report(HOOK, "toolu_1"), report(OTLP, None), True),  # same args, one id missing
        (report(HOOK, "toolu_1"), report(OTLP, None, "sha256:" + "b" * 64), True),  # FIFO by tool
        (report(HOOK, "toolu_1"), report(OTLP, None, tool="Edit"), False),  # another tool
        (report(HOOK, "toolu_1"), report(HOOK, "toolu_2"), False),  # one source: two calls
        (report(OTLP, None), report(OTLP, None), False),  # one source: identical calls are two
    ],
)
def test_a_report_matches_only_the_same_call_from_the_other_source(
    first: ToolReport, second: ToolReport, same: bool
) -> None:
    book = CallBook(Deriver(loop_guard=0))
    assert rows(book, first, second) == [1, 0 if same else 1]


def test_identical_calls_reported_by_both_sources_are_paired_one_to_one() -> None:
    book = CallBook(Deriver(loop_guard=0))
    hooks = [report(HOOK, f"toolu_{i}") for i in range(3)]
    exports = [report(OTLP, None) for _ in range(3)]
    assert rows(book, *hooks) == [1, 1, 1]
    assert rows(book, *exports) == [0, 0, 0]
    assert rows(book, report(OTLP, None)) == [1]  # a fourth export is a fourth call


def test_a_report_waits_for_its_twin_only_within_the_window() -> None:
    book = CallBook(Deriver(loop_guard=0))
    assert rows(book, report(HOOK, "toolu_1"), now=1) == [1]
    assert rows(book, report(OTLP, None), now=2 + MATCH_WINDOW_MS) == [1]


def test_the_loop_guard_counts_real_calls_not_reports() -> None:
    book = CallBook(Deriver(loop_guard=3))
    trips = []
    for i in range(3):
        for source, cid in ((HOOK, f"toolu_{i}"), (OTLP, None)):
            decided = book.call(report(source, cid), 1)
            trips.append(decided.trip is not None)
    assert trips == [False, False, False, False, True, False]  # the third real call trips


def test_a_fresh_book_reads_runs_and_streaks_back_from_the_store(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    first = Rig(loop_guard=3)
    call = fixture("PostToolUseFailure")
    for payload in (call, call):
        first.hook(payload)
    conn = connect(store)
    Committer(conn).commit_checked(first.journal.rows)
    # serve restarts: a new book, its memory read back from the store
    again = Rig(loop_guard=3)
    again.book = CallBook(Deriver(loop_guard=3), StoreRecall(lambda: conn, 3))
    again.hooks.book = again.book
    again.hook(call)
    types = [r["type"] for r in again.journal.dicts()]
    assert "run_started" not in types  # the run was journaled before the restart
    assert types == ["tool_call", "loop_stopped"]  # the streak went on: 2 + 1 = 3
    conn.close()


def test_rows_not_stored_are_forgotten_so_the_next_call_starts_the_run_again() -> None:
    rig = Rig()
    rig.journal.fail = "disk full"
    reply = rig.hook(fixture("PreToolUse"))
    assert (reply.status, reply.failed) == (503, "store") and "disk full" in reply.text
    rig.journal.fail = None
    rig.hook(fixture("PreToolUse"))
    assert [r["type"] for r in rig.journal.dicts()] == ["run_started"]


HOLD = Hold(7, "h01", None, "r", "h", 1, 1, 1, "rule_hold: rule `r` fired at seq 1: h01 ran x")
STOPPED = RunStop("h01", "s", "halt", 3, 9, "h01 ran y")


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_claude_format_denies_and_blocks(agent: str) -> None:
    rig = Rig()
    rig.gate.answer = GateState((HOLD,))
    pre = rig.hook(fixture("PreToolUse"), agent=agent)
    assert pre.decision == "deny"
    out = pre.answer["hookSpecificOutput"]
    assert (out["hookEventName"], out["permissionDecision"]) == ("PreToolUse", "deny")
    assert out["permissionDecisionReason"].endswith("release: harness holds release 7")
    prompt = rig.hook(fixture("UserPromptSubmit"), agent=agent)
    assert prompt.decision == "block" and prompt.answer["decision"] == "block"
    assert rig.hook(fixture("Notification"), agent=agent).answer == {}  # holds gate new work only


def test_claude_code_stop_denies_the_tool_and_ends_the_loop() -> None:
    rig = Rig()
    rig.gate.answer = GateState((HOLD,), STOPPED)
    stop = rig.hook(fixture("PreToolUse"))
    assert stop.decision == "stop"
    assert stop.answer["continue"] is False and "stopped by rule halt" in stop.answer["stopReason"]
    # continue: false alone lets Claude Code run the tool first: the stop also denies it
    assert stop.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    post = rig.hook(fixture("PostToolUse")).answer
    assert post == {"continue": False, "stopReason": stop.answer["stopReason"]}


def test_codex_stop_only_denies_because_codex_refuses_continue_false_whole() -> None:
    rig = Rig()
    rig.gate.answer = GateState((), STOPPED)
    stop = rig.hook(fixture("PreToolUse"), agent="codex")
    assert stop.decision == "stop"
    assert set(stop.answer) == {"hookSpecificOutput"}  # no continue, no stopReason
    assert stop.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "stopped by rule halt" in stop.answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert rig.hook(fixture("Stop"), agent="codex").answer == {}


def test_a_late_answer_is_said() -> None:
    rig = Rig()
    rig.gate.late = True
    assert rig.hook(fixture("PreToolUse")).late is True


def test_a_gated_call_asks_the_gate_for_its_harness_run_and_holds() -> None:
    rig = Rig()
    assert rig.hook(fixture("PreToolUse")).answer == {}
    assert rig.gate.asked == [("h01", "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f", True)]


def codex_post(call_id: str) -> dict[str, object]:
    return dict(
        fixture("PostToolUse"),
        tool_name="Bash",
        tool_input={"command": "make test"},
        tool_use_id=call_id,
        tool_response="",
    )


def codex_record(call_id: str, exit_code: int) -> object:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    kv = rl.resource.attributes.add()
    kv.key, kv.value.string_value = "harness.id", "h01"
    rec = rl.scope_logs.add().log_records.add()
    rec.event_name = "event otel/src/tool_result.rs:54"
    for key, value in (
        ("event.name", "codex.tool_result"),
        ("tool_name", "exec_command"),
        ("call_id", call_id),
        ("conversation.id", "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"),
        ("success", "true"),
        ("arguments", '{"cmd": "make test"}'),
        ("output", f"Chunk ID: 1\nProcess exited with code {exit_code}\nOutput:\nboom\n"),
    ):
        a = rec.attributes.add()
        a.key, a.value.string_value = key, value
    return request


def test_a_codex_call_is_journaled_once_with_the_outcome_only_its_otlp_record_knows() -> None:
    import threading

    rig = Rig()
    rig.hooks.merge_wait_s = 5.0
    rig.receiver.receive(codex_record("call_0", 0))  # the harness exports Codex OTLP
    start = len(rig.journal.rows)
    # the hook arrives first and waits; the OTLP record of the same call comes 50 ms later
    timer = threading.Timer(0.05, lambda: rig.receiver.receive(codex_record("call_1", 3)))
    timer.start()
    reply = rig.hook(codex_post("call_1"), agent="codex")
    timer.join()
    assert reply.status == 200 and reply.rows == 1
    (call,) = [r for r in rig.new_rows(start) if r["type"] == "tool_call"]
    assert (call["outcome"], call["n"]) == ("error", 3)
    assert call["cause_digest"].startswith("sha256:")


def test_a_codex_call_whose_record_is_late_is_journaled_ok_and_the_record_is_a_duplicate() -> None:
    rig = Rig()
    rig.hooks.merge_wait_s = 0.05
    rig.receiver.receive(codex_record("call_0", 0))
    start = len(rig.journal.rows)
    rig.hook(codex_post("call_1"), agent="codex")
    late = rig.receiver.receive(codex_record("call_1", 3))
    assert late.duplicates == 1
    calls = [r for r in rig.new_rows(start) if r["type"] == "tool_call"]
    assert [c["outcome"] for c in calls] == ["ok"]


def test_a_codex_hook_without_otlp_never_waits() -> None:
    import time

    rig = Rig()
    rig.hooks.merge_wait_s = 5.0
    started = time.monotonic()
    rig.hook(codex_post("call_1"), agent="codex")
    assert time.monotonic() - started < 2.0  # no OTLP from this harness: nothing to wait for
    assert [r["outcome"] for r in rig.journal.dicts() if r["type"] == "tool_call"] == ["ok"]


class FlakyRecall:
    """A store that cannot be read for the first ``fails`` questions, then knows nothing."""

    def __init__(self, fails: int) -> None:
        self.fails = fails

    def _ask(self) -> None:
        from engine.journal.errors import StoreUnavailable

        if self.fails > 0:
            self.fails -= 1
            raise StoreUnavailable("disk I/O error")

    def run_started(self, harness: str, run: str) -> bool:
        self._ask()
        return False

    def streak(self, harness: str, run: str | None) -> None:
        self._ask()

    def editors(self, path: str, since_ms: int) -> dict[str, int]:
        self._ask()
        return {}


def test_a_store_read_that_fails_mid_decision_is_503_and_the_book_forgets_the_run() -> None:
    from engine.serve.calls import CallBook
    from engine.serve.derive import Deriver

    rig = Rig()
    rig.book = rig.hooks.book = rig.receiver.book = CallBook(Deriver(), FlakyRecall(1))
    failed = rig.hook(fixture("PostToolUse"))
    assert (failed.status, failed.failed) == (503, "store")
    assert rig.journal.rows == []
    rig.hook(fixture("PostToolUse"))  # the retry: the run is started, the call journaled once
    assert [r["type"] for r in rig.journal.dicts()] == ["run_started", "tool_call", "file_edited"]
