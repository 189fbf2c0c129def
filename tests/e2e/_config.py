"""Hook and OpenTelemetry configuration of the three agent CLIs, each in its own format."""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORD_HOOK = Path(__file__).with_name("record_hook.py")

# Every hook event each client fires in a `-p` / `exec` run (tool events and lifecycle).
CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Stop",
    "SessionEnd",
)
# Codex clamps a SessionEnd hook's timeout to 3 s (it warns on stderr).
CODEX_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
)
GEMINI_EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
)
TOOL_EVENTS = frozenset(
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "BeforeTool", "AfterTool"}
)


@dataclass(frozen=True)
class Hook:
    """One handler on one event, in the client's own event vocabulary.

    Exactly one of ``command`` (a shell command line; all three clients) and ``url`` (an
    http hook; Claude Code only). ``matcher`` None: every tool for tool events, and no
    matcher for lifecycle events.
    """

    event: str
    command: str = ""
    url: str = ""
    matcher: str | None = None
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("a Hook has exactly one of command and url")


def command_hooks(command: str, events: Iterable[str], timeout_s: float = 30.0) -> tuple[Hook, ...]:
    """``command`` on each of ``events``."""
    return tuple(Hook(event, command=command, timeout_s=timeout_s) for event in events)


def http_hooks(url: str, events: Iterable[str], timeout_s: float = 30.0) -> tuple[Hook, ...]:
    """An http hook posting to ``url`` on each of ``events`` (Claude Code only)."""
    return tuple(Hook(event, url=url, timeout_s=timeout_s) for event in events)


@dataclass(frozen=True)
class Otlp:
    """Where a client exports its OpenTelemetry logs.

    ``endpoint`` is the receiver's base URL (``http://127.0.0.1:4318``): the clients post
    to ``<endpoint>/v1/logs``. ``resource`` becomes ``OTEL_RESOURCE_ATTRIBUTES`` (e.g.
    ``{"harness.id": "h1", "harness.project": "p"}``), ``headers`` the exporter's headers
    (e.g. ``{"Authorization": "Bearer …"}``). ``log_prompts`` exports prompt text too
    (Gemini's ``logPrompts``, Claude Code's ``OTEL_LOG_USER_PROMPTS``), which also carries
    Gemini's ``function_args``.
    """

    endpoint: str
    resource: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    log_prompts: bool = False

    @property
    def logs_url(self) -> str:
        return self.endpoint.rstrip("/") + "/v1/logs"

    def resource_env(self) -> dict[str, str]:
        if not self.resource:
            return {}
        return {"OTEL_RESOURCE_ATTRIBUTES": ",".join(f"{k}={v}" for k, v in self.resource.items())}

    def headers_env(self) -> dict[str, str]:
        if not self.headers:
            return {}
        return {"OTEL_EXPORTER_OTLP_HEADERS": ",".join(f"{k}={v}" for k, v in self.headers.items())}


# --- Claude Code and Codex (one hooks format) ----------------------------------------------
def claude_hooks_block(hooks: Iterable[Hook], *, http_allowed: bool) -> dict[str, Any]:
    """``{"PreToolUse": [{"matcher": "*", "hooks": [{"type": ..., ...}]}], ...}``."""
    block: dict[str, list[dict[str, Any]]] = {}
    for hook in hooks:
        if hook.url and not http_allowed:
            raise ValueError(f"{hook.event}: this client has no http hooks")
        # whole seconds: Codex rejects the whole hooks.json on a fractional timeout
        handler: dict[str, Any] = {"timeout": max(1, math.ceil(hook.timeout_s))}
        if hook.url:
            handler.update(type="http", url=hook.url)
        else:
            handler.update(type="command", command=hook.command)
        group: dict[str, Any] = {"hooks": [handler]}
        matcher = hook.matcher if hook.matcher is not None else _all_tools(hook.event, "*")
        if matcher is not None:
            group["matcher"] = matcher
        block.setdefault(hook.event, []).append(group)
    return block


def claude_settings(hooks: Iterable[Hook]) -> dict[str, Any]:
    """Claude Code's ``settings.json`` (written to ``$CLAUDE_CONFIG_DIR``)."""
    return {"hooks": claude_hooks_block(hooks, http_allowed=True)}


def claude_otel_env(otlp: Otlp) -> dict[str, str]:
    """Claude Code's OpenTelemetry logs over OTLP/HTTP protobuf, exported every 250 ms."""
    env = {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "OTEL_LOGS_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": otlp.logs_url,
        "OTEL_LOGS_EXPORT_INTERVAL": "250",
        "OTEL_LOG_TOOL_DETAILS": "1",
    }
    if otlp.log_prompts:
        env["OTEL_LOG_USER_PROMPTS"] = "1"
    return env | otlp.resource_env() | otlp.headers_env()


def codex_hooks_json(hooks: Iterable[Hook]) -> dict[str, Any]:
    """``$CODEX_HOME/hooks.json``: Claude Code's format, command handlers only."""
    return {"hooks": claude_hooks_block(hooks, http_allowed=False)}


def codex_otel_toml(otlp: Otlp) -> str:
    """The ``[otel]`` table of Codex's ``config.toml``: OTLP/HTTP protobuf (``binary``)."""
    headers = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in otlp.headers.items())
    exporter = (
        f'{{ otlp-http = {{ endpoint = {json.dumps(otlp.logs_url)}, protocol = "binary", '
        f"headers = {{ {headers} }} }} }}"
    )
    return (
        "[otel]\n"
        'environment = "e2e"\n'
        f"log_user_prompt = {'true' if otlp.log_prompts else 'false'}\n"
        f"exporter = {exporter}\n"
    )


# --- Gemini CLI ----------------------------------------------------------------------------
def gemini_hooks_block(hooks: Iterable[Hook]) -> dict[str, Any]:
    """``settings.json`` ``hooks``: ``{"BeforeTool": [{"matcher", "hooks": [{type, command,
    timeout (ms)}]}]}``; command handlers only."""
    block: dict[str, list[dict[str, Any]]] = {}
    for hook in hooks:
        if hook.url:
            raise ValueError(f"{hook.event}: Gemini CLI has no http hooks")
        handler = {
            "type": "command",
            "command": hook.command,
            "timeout": int(hook.timeout_s * 1000),
        }
        group: dict[str, Any] = {"hooks": [handler]}
        matcher = hook.matcher if hook.matcher is not None else _all_tools(hook.event, ".*")
        if matcher is not None:
            group["matcher"] = matcher
        block.setdefault(hook.event, []).append(group)
    return block


def gemini_telemetry(otlp: Otlp) -> dict[str, Any]:
    """``settings.json`` ``telemetry``: OTLP over http (Gemini then sends OTLP/JSON)."""
    return {
        "enabled": True,
        "target": "local",
        "otlpEndpoint": otlp.endpoint,
        "otlpProtocol": "http",
        "logPrompts": otlp.log_prompts,
    }


def _all_tools(event: str, pattern: str) -> str | None:
    return pattern if event in TOOL_EVENTS else None


# --- the recording hook --------------------------------------------------------------------
@dataclass(frozen=True)
class RecordingHook:
    """``record_hook.py`` wired to one log and one rule file: the command to configure, the
    rules to set, and the payloads it recorded."""

    log: Path
    rules_file: Path
    tag: str = ""

    @classmethod
    def at(cls, folder: Path, tag: str = "") -> RecordingHook:
        folder.mkdir(parents=True, exist_ok=True)
        hook = cls(folder / "hook-calls.jsonl", folder / "hook-rules.json", tag)
        hook.set_rules([])
        return hook

    @property
    def command(self) -> str:
        argv = [sys.executable, "-I", "-S", str(RECORD_HOOK), str(self.log), str(self.rules_file)]
        return shlex.join([*argv, self.tag] if self.tag else argv)

    def set_rules(self, rules: list[dict[str, Any]]) -> None:
        self.rules_file.write_text(json.dumps(rules), encoding="utf-8")

    def calls(self) -> list[dict[str, Any]]:
        """Each recorded call: ``{"tag", "at", "mono", "payload", "answer", "exit"}``."""
        if not self.log.is_file():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def payloads(self, event: str | None = None) -> list[dict[str, Any]]:
        return [
            c["payload"]
            for c in self.calls()
            if event is None or c["payload"].get("hook_event_name") == event
        ]

    def events(self) -> list[str]:
        return [str(c["payload"].get("hook_event_name")) for c in self.calls()]
