"""The agents serve gates, each in its own dialect: hook payloads in, answers out.

Claude Code, Codex CLI and Gemini CLI call hooks at the same moments of a run
under different names, and obey answers of different shapes. This module is
the one place that knows the three dialects. It reads a payload into an
agent-neutral :class:`HookEvent` (which *moment* of a run it is: the session
starts, a prompt arrives, a tool is about to run, a tool ran or failed, the
session ends) and renders a :class:`~engine.serve.verdict.Verdict` back as the
JSON that agent obeys:

- Claude Code: ``PreToolUse`` is denied with ``hookSpecificOutput.
  permissionDecision: "deny"``, ``UserPromptSubmit`` blocked with
  ``decision: "block"``; a stop adds ``continue: false`` (alone it lets the
  tool run first, so a stopped ``PreToolUse`` gets both).
- Codex CLI: Claude Code's payloads and answers (its ``hooks.json``), command
  handlers only, and no failure event: a failed command arrives as an
  ordinary ``PostToolUse`` whose response has no exit code. Codex rejects a
  ``PreToolUse`` answer holding ``continue``/``stopReason`` *whole*, deny
  included, and runs the tool: so a stopped run's calls are only denied
  (every one of them, which holds the run), never told to stop.
- Gemini CLI: ``BeforeTool``/``AfterTool``/``BeforeAgent``, answered with
  ``decision: "deny"`` and ``reason`` (a Claude-format ``permissionDecision``
  is ignored by it and the tool runs); ``AfterTool`` reports a failure as
  ``tool_response.error``, a shell command's exit code only as an ``Exit
  Code: N`` line of ``tool_response.llmContent``; no call id.

An exit code is the one thing read out of a tool's output, and only its
number (:meth:`HookEvent.exit_code`).

Only identifiers, enums and the payload's structure are read here; the
payload's text fields are handed on untouched to be digested, never stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from engine.record import Record
from engine.serve.canon import ident
from engine.serve.verdict import DENY, STOP, Verdict

CLAUDE_CODE, CODEX, GEMINI = "claude-code", "codex", "gemini"
#: The agents with a hook dialect, as named on the route and the command line.
AGENTS: tuple[str, ...] = (CLAUDE_CODE, CODEX, GEMINI)

#: The moments of a run a hook can report (the agent-neutral event vocabulary).
START, PROMPT, BEFORE_TOOL, AFTER_TOOL, TOOL_FAILED, END, OTHER = (
    "start",
    "prompt",
    "before_tool",
    "after_tool",
    "tool_failed",
    "end",
    "other",
)
#: Moments answered from holds (stops answer every moment of a stopped run).
GATED: frozenset[str] = frozenset({BEFORE_TOOL, PROMPT})

_CLAUDE: dict[str, str] = {
    "SessionStart": START,
    "UserPromptSubmit": PROMPT,
    "PreToolUse": BEFORE_TOOL,
    "PermissionRequest": OTHER,
    "PostToolUse": AFTER_TOOL,
    "PostToolUseFailure": TOOL_FAILED,
    "Notification": OTHER,
    "Stop": OTHER,
    "SubagentStop": OTHER,
    "PreCompact": OTHER,
    "PostToolBatch": OTHER,
    "SessionEnd": END,
}
_GEMINI: dict[str, str] = {
    "SessionStart": START,
    "BeforeAgent": PROMPT,
    "BeforeTool": BEFORE_TOOL,
    "AfterTool": AFTER_TOOL,
    "AfterAgent": OTHER,
    "BeforeModel": OTHER,
    "AfterModel": OTHER,
    "BeforeToolSelection": OTHER,
    "Notification": OTHER,
    "PreCompress": OTHER,
    "SessionEnd": END,
}
#: Each agent's documented hook events and the moment each one is.
EVENTS: dict[str, dict[str, str]] = {CLAUDE_CODE: _CLAUDE, CODEX: _CLAUDE, GEMINI: _GEMINI}
#: An exit code line of a tool's output: Gemini's ``Exit Code: 3``, Codex's ``Exit code: 0``.
_EXIT_LINE = re.compile(r"^Exit [Cc]ode: (-?\d{1,10})\s*$", re.MULTILINE)


class PayloadError(ValueError):
    """The payload is not a hook payload at all (not an object, no event name)."""


class HookEvent(Record):
    """One hook payload, read: which agent and moment, its run, and the payload itself.

    ``label`` is the agent's event name when documented, else ``other`` (a
    metrics label never comes from the network). ``refused`` names fields
    that were present but unusable (a session id that is no identifier).
    """

    __slots__ = ("agent", "label", "moment", "payload", "refused", "run")
    __match_args__ = ("agent", "label", "moment", "run", "refused", "payload")

    def __init__(
        self,
        agent: str,
        label: str,
        moment: str,
        run: str | None,
        refused: tuple[str, ...],
        payload: Mapping[str, object],
    ) -> None:
        self.agent: Final = agent
        self.label: Final = label
        self.moment: Final = moment
        self.run: Final = run
        self.refused: Final = refused
        self.payload: Final = payload

    def error(self) -> object:
        """What the agent says went wrong with the tool (to digest), or None."""
        if self.agent == GEMINI:
            response = self.payload.get("tool_response")
            if isinstance(response, Mapping):
                return response.get("error") or response.get("llmContent")
            return None
        return self.payload.get("error")

    def exit_code(self) -> int | None:
        """The exit code the tool's output reports (Gemini's shell, Codex's patch), if any."""
        response = self.payload.get("tool_response")
        text = response.get("llmContent") if isinstance(response, Mapping) else response
        if not isinstance(text, str):
            return None
        m = _EXIT_LINE.search(text)
        code = int(m.group(1)) if m else None
        return code if code is not None and -(2**31) <= code < 2**31 else None


def read_event(agent: str, payload: object) -> HookEvent:
    """Read ``payload`` in ``agent``'s dialect; PayloadError when it is no hook payload."""
    if not isinstance(payload, Mapping):
        raise PayloadError(f"expected a JSON object, got {type(payload).__name__}")
    name = payload.get("hook_event_name")
    if not isinstance(name, str):
        raise PayloadError("hook_event_name: missing or not a string")
    table = EVENTS[agent]
    moment = table.get(name)
    label = name if moment is not None else "other"
    moment = moment or OTHER
    if agent == GEMINI and moment == AFTER_TOOL:
        response = payload.get("tool_response")
        if isinstance(response, Mapping) and response.get("error") not in (None, "", {}):
            moment = TOOL_FAILED
    session = payload.get("session_id")
    run = ident(session)
    refused = ("session_id",) if session is not None and run is None else ()
    return HookEvent(agent, label, moment, run, refused, payload)


def render(event: HookEvent, verdict: Verdict) -> dict[str, object]:
    """The JSON answer ``event``'s agent obeys for ``verdict`` (``{}`` when free)."""
    if verdict.decision == STOP:
        return _stop(event, verdict.reason)
    if verdict.decision != DENY:
        return {}
    if event.agent == GEMINI:
        return {"decision": "deny", "reason": verdict.reason}
    if event.moment == BEFORE_TOOL:
        return {"hookSpecificOutput": _claude_deny(event.label, verdict.reason)}
    return {"decision": "block", "reason": verdict.reason}


def _claude_deny(label: str, reason: str) -> dict[str, object]:
    return {
        "hookEventName": label,
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }


def _stop(event: HookEvent, reason: str) -> dict[str, object]:
    """A stopped run: the tool must not run, and the agent's loop must end where it can."""
    if event.agent == CODEX:
        # Codex refuses a PreToolUse answer with continue/stopReason whole (and runs the
        # tool); denying every call of the stopped run is what holds it.
        if event.moment == BEFORE_TOOL:
            return {"hookSpecificOutput": _claude_deny(event.label, reason)}
        if event.moment == PROMPT:
            return {"decision": "block", "reason": reason}
        if event.moment in (AFTER_TOOL, TOOL_FAILED):
            return {"continue": False, "stopReason": reason}
        return {}
    answer: dict[str, object] = {"continue": False, "stopReason": reason}
    if event.agent == GEMINI:
        if event.moment in GATED:
            answer.update(decision="deny", reason=reason)
    elif event.moment == BEFORE_TOOL:
        answer["hookSpecificOutput"] = _claude_deny(event.label, reason)
    elif event.moment == PROMPT:
        answer.update(decision="block", reason=reason)
    return answer
