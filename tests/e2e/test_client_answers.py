"""What each real client does with a hook's stop, deny and exit-2 answers; Claude's http hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import installed
from tests.e2e.kit import (
    CLAUDE,
    CLAUDE_EVENTS,
    ClientKit,
    Receiver,
    RecordingHook,
    Script,
    command_hooks,
    http_hooks,
    shell,
    turn,
)

pytestmark = pytest.mark.e2e

# s1 alone, then s2 and s3 in ONE assistant message, then s4 alone, then "done".
STOP_SCRIPT = Script.of(
    shell("printf 1 > s1.txt"),
    turn(shell("printf 2 > s2.txt  # MARK_s2"), shell("printf 3 > s3.txt  # MARK_s3")),
    shell("printf 4 > s4.txt  # MARK_s4"),
)


def _answer(kit: ClientKit, kind: str) -> dict[str, Any]:
    stop = kit.stop("STOPREASON_e1")
    if kind == "stop":
        return stop
    if kind == "deny":
        return kit.deny("DENYREASON_e1")
    return kit.deny("DENYREASON_e1") | stop  # "deny+stop": DESIGN's answer to a stopped run


# (client, answer, calls answered, files that exist after the run, turns the fake played)
STOP_CASES = [
    # Claude Code: continue:false lets the tool and the rest of its message run, then ends.
    ("claude", "stop", ("s2",), {"s1", "s2", "s3"}, 2),
    ("claude", "deny+stop", ("s2",), {"s1", "s3"}, 2),
    ("claude", "deny+stop", ("s2", "s3"), {"s1"}, 2),
    # Codex rejects continue:false/stopReason on PreToolUse as invalid output ("hook:
    # PreToolUse Failed") and fails open: the deny beside it is dropped too.
    ("codex", "stop", ("s2",), {"s1", "s2", "s3", "s4"}, 4),
    ("codex", "deny+stop", ("s2",), {"s1", "s2", "s3", "s4"}, 4),
    ("codex", "deny", ("s2", "s3", "s4"), {"s1"}, 4),
    # Gemini CLI: continue:false blocks the tool and ends the loop, but the other call of
    # the same message (already dispatched) still runs unless it is denied too.
    ("gemini", "stop", ("s2",), {"s1", "s3"}, 2),
    ("gemini", "deny+stop", ("s2",), {"s1", "s3"}, 2),
    ("gemini", "deny+stop", ("s2", "s3"), {"s1"}, 2),
]


@pytest.mark.parametrize(
    ("client", "kind", "targets", "files", "turns"),
    STOP_CASES,
    ids=[f"{c[0]}-{c[1]}-{'+'.join(c[2])}" for c in STOP_CASES],
)
def test_e_stop_answers(
    client: str,
    kind: str,
    targets: tuple[str, ...],
    files: set[str],
    turns: int,
    tmp_path: Path,
    hook: RecordingHook,
) -> None:
    kit = installed(client)
    answer = _answer(kit, kind)
    hook.set_rules(
        [{"event": kit.pre_tool, "contains": f"MARK_{t}", "answer": answer} for t in targets]
    )

    run = kit.run(STOP_SCRIPT, tmp_path, hooks=command_hooks(hook.command, kit.events)).check()

    assert {p.stem for p in run.workdir.iterdir()} == files
    assert run.recording.turns_played == turns
    asked = [p for p in hook.payloads(kit.pre_tool) if "MARK_s3" in str(p["tool_input"])]
    assert len(asked) == 1  # every client asks about s3, even after a stop on s2
    if kit.name == "gemini" and "stop" in kind:
        assert "STOPREASON_e1" in run.stderr
    if kit.name == "codex" and "stop" in kind:
        assert "hook: PreToolUse Failed" in run.stderr


@pytest.mark.parametrize("stdout", [None, {}], ids=["no-stdout", "json-stdout"])
def test_hook_exit_2(
    kit: ClientKit, stdout: dict[str, Any] | None, tmp_path: Path, hook: RecordingHook
) -> None:
    """Exit code 2 with stderr blocks the call in all three, stderr being what the model
    reads (so ``harness hook`` exiting 2 on a usage error blocks every call); except that
    Gemini CLI takes exit 2 with JSON on stdout for a failed hook and runs the tool."""
    rule = {"event": kit.pre_tool, "contains": "MARK_x2", "exit": 2, "stderr": "EXIT2REASON_x"}
    hook.set_rules([rule | ({} if stdout is None else {"answer": stdout})])
    script = Script.of(shell("printf X > x.txt  # MARK_x2"), shell("printf Y > y.txt"))

    run = kit.run(script, tmp_path, hooks=command_hooks(hook.command, kit.events)).check()

    assert (run.workdir / "y.txt").exists()
    if kit.name == "gemini" and stdout is not None:
        assert (run.workdir / "x.txt").exists()
        assert "failed for event BeforeTool" in run.stderr
        return
    assert not (run.workdir / "x.txt").exists()
    assert run.calls[0].result is not None and "EXIT2REASON_x" in run.calls[0].result


def test_gemini_ignores_a_claude_format_deny(tmp_path: Path, hook: RecordingHook) -> None:
    kit = installed("gemini")
    hook.set_rules(
        [{"event": "BeforeTool", "contains": "MARK_g", "answer": CLAUDE.deny("DENYREASON_g")}]
    )
    script = Script.of(shell("printf G > g.txt  # MARK_g"))

    run = kit.run(script, tmp_path, hooks=command_hooks(hook.command, kit.events)).check()

    assert (run.workdir / "g.txt").read_text() == "G"  # the tool ran
    assert run.calls[0].result is not None and "DENYREASON_g" not in run.calls[0].result


def test_claude_http_hooks_answer_and_skip_session_start(
    tmp_path: Path, hook: RecordingHook, receiver: Receiver
) -> None:
    """Every event but SessionStart reaches an http hook (Claude Code skips http handlers
    for SessionStart and Setup); a command hook on SessionStart still runs; an http deny
    blocks the call."""
    kit = installed("claude")
    receiver.rules = [
        {"event": "PreToolUse", "contains": "MARK_h", "answer": kit.deny("DENYREASON_h")}
    ]
    hooks = http_hooks(receiver.hook_url(), CLAUDE_EVENTS)
    hooks += command_hooks(hook.command, ["SessionStart"])
    script = Script.of(shell("printf H > h.txt  # MARK_h"), shell("printf I > i.txt"))

    run = kit.run(script, tmp_path, hooks=hooks).check()

    assert not (run.workdir / "h.txt").exists()
    assert (run.workdir / "i.txt").exists()
    assert run.calls[0].result is not None and "DENYREASON_h" in run.calls[0].result
    seen = [h.payload["hook_event_name"] for h in receiver.hooks]
    assert "SessionStart" not in seen
    assert seen[0] == "UserPromptSubmit" and seen[-1] == "SessionEnd"
    assert {"PreToolUse", "PostToolUse", "PostToolBatch", "Stop"} <= set(seen)
    assert hook.events() == ["SessionStart"]
    assert {h.path for h in receiver.hooks} == {"/hooks/claude-code"}
    sessions = {h.payload["session_id"] for h in receiver.hooks}
    assert sessions == {hook.payloads()[0]["session_id"]}
