"""The end-to-end kit in one import: scripts, drivers, hook/OTLP configuration, recorders.

from tests.e2e.kit import CLIENTS, Otlp, RecordingHook, Script, command_hooks, shell

kit = CLIENTS["codex"]
hook = RecordingHook.at(tmp_path / "hook")
run = kit.run(Script.of(shell("printf x > x.txt")), tmp_path,
              hooks=command_hooks(hook.command, kit.events)).check()
"""

from __future__ import annotations

from tests.e2e._clients import CLAUDE, CLIENTS, CODEX, GEMINI, ClientKit
from tests.e2e._config import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    GEMINI_EVENTS,
    Hook,
    Otlp,
    RecordingHook,
    command_hooks,
    http_hooks,
)
from tests.e2e._drivers import RunResult, run_claude, run_codex, run_gemini
from tests.e2e._npm import install
from tests.e2e._receiver import HookCall, LogRecord, OtlpBody, Receiver, decode_logs
from tests.e2e._script import (
    Call,
    Recording,
    Script,
    ToolCallRecord,
    Turn,
    raw,
    say,
    shell,
    turn,
    write,
)

__all__ = [
    "CLAUDE",
    "CLAUDE_EVENTS",
    "CLIENTS",
    "CODEX",
    "CODEX_EVENTS",
    "GEMINI",
    "GEMINI_EVENTS",
    "Call",
    "ClientKit",
    "Hook",
    "HookCall",
    "LogRecord",
    "Otlp",
    "OtlpBody",
    "Receiver",
    "Recording",
    "RecordingHook",
    "RunResult",
    "Script",
    "ToolCallRecord",
    "Turn",
    "command_hooks",
    "decode_logs",
    "http_hooks",
    "install",
    "raw",
    "run_claude",
    "run_codex",
    "run_gemini",
    "say",
    "shell",
    "turn",
    "write",
]
