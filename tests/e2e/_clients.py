"""What a portable end-to-end test needs to know about each client: events, tool names, answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.e2e._config import CLAUDE_EVENTS, CODEX_EVENTS, GEMINI_EVENTS
from tests.e2e._drivers import RunResult, run_claude, run_codex, run_gemini
from tests.e2e._script import Vendor


@dataclass(frozen=True)
class ClientKit:
    """One agent CLI as a test sees it, so one test body can run against all three.

    ``shell_tool`` is the ``tool_name`` its *hooks* report for ``shell(...)`` (Codex reports
    its ``exec_command`` as ``Bash``); ``otlp_shell_tool`` the name its OTLP records use.
    ``deny``/``stop`` build the answers in the client's own format.
    """

    name: Vendor
    run: Callable[..., RunResult]
    events: tuple[str, ...]
    pre_tool: str
    post_tool: str
    prompt_event: str
    shell_tool: str
    otlp_shell_tool: str
    otlp_tool_event: str
    http_hooks: bool

    def deny(self, reason: str) -> dict[str, Any]:
        """The answer to ``pre_tool`` that blocks the call and hands ``reason`` to the model."""
        if self.name == "gemini":
            return {"decision": "deny", "reason": reason}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }

    @staticmethod
    def stop(reason: str) -> dict[str, Any]:
        """``continue: false`` with ``stopReason``: the same field names in all three."""
        return {"continue": False, "stopReason": reason}


CLAUDE = ClientKit(
    name="claude",
    run=run_claude,
    events=CLAUDE_EVENTS,
    pre_tool="PreToolUse",
    post_tool="PostToolUse",
    prompt_event="UserPromptSubmit",
    shell_tool="Bash",
    otlp_shell_tool="Bash",
    otlp_tool_event="claude_code.tool_result",
    http_hooks=True,
)
CODEX = ClientKit(
    name="codex",
    run=run_codex,
    events=CODEX_EVENTS,
    pre_tool="PreToolUse",
    post_tool="PostToolUse",
    prompt_event="UserPromptSubmit",
    shell_tool="Bash",
    otlp_shell_tool="exec_command",
    otlp_tool_event="codex.tool_result",
    http_hooks=False,
)
GEMINI = ClientKit(
    name="gemini",
    run=run_gemini,
    events=GEMINI_EVENTS,
    pre_tool="BeforeTool",
    post_tool="AfterTool",
    prompt_event="BeforeAgent",
    shell_tool="run_shell_command",
    otlp_shell_tool="run_shell_command",
    otlp_tool_event="gemini_cli.tool_call",
    http_hooks=False,
)
CLIENTS: dict[str, ClientKit] = {kit.name: kit for kit in (CLAUDE, CODEX, GEMINI)}
