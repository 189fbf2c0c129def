"""Every snippet of the README's "Connect your agents" section parses and fits serve.

The section is what a new user copies: each block is checked against the
parser that will read it (Claude Code's, Codex's and Gemini CLI's settings
shapes as the real clients were seen to accept them in tests/e2e, our own
strict harness.toml loader and command line), so a snippet that drifts from
the code fails here.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from engine.cli import cmd_hook
from engine.config_text import parse_config

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Connect your agents")
    return text[start : text.index("\n## ", start + 3)]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), flags=re.S)


def handlers(settings: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (event, hook)
        for event, groups in settings["hooks"].items()
        for group in groups
        for hook in group["hooks"]
    ]


def test_claude_code_http_hooks_point_at_serve_and_gate_every_moment() -> None:
    claude = json.loads(blocks("json")[0])
    events = {event for event, _ in handlers(claude)}
    assert {"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"} <= events
    assert "SessionStart" not in events  # never sent to http hooks: run_started is derived
    for _event, hook in handlers(claude):
        assert hook["type"] == "http"
        url = urlsplit(hook["url"])
        assert (url.hostname, url.port, url.path) == ("127.0.0.1", 4318, "/hooks/claude-code")
        assert parse_qs(url.query) == {"harness": ["h01"], "project": ["atlas"]}


def command_of(hook: dict[str, Any], agent: str) -> None:
    argv = shlex.split(hook["command"])
    assert argv[:3] == ["harness", "hook", agent]
    parsed = cmd_hook.plain_args(argv[2:])  # what `harness hook` reads, without argparse
    assert parsed is not None and parsed.agent == agent and parsed.harness


def test_codex_hooks_json_is_command_hooks_with_integer_timeouts() -> None:
    codex = json.loads(blocks("json")[1])
    events = {event for event, _ in handlers(codex)}
    assert {"PreToolUse", "PostToolUse", "UserPromptSubmit"} <= events
    for _event, hook in handlers(codex):
        assert hook["type"] == "command"
        assert isinstance(hook["timeout"], int)  # Codex refuses the whole file otherwise
        command_of(hook, "codex")


def test_gemini_settings_hooks_and_http_telemetry() -> None:
    gemini = json.loads(blocks("json")[2])
    events = {event for event, _ in handlers(gemini)}
    assert {"BeforeTool", "AfterTool", "BeforeAgent"} <= events
    for _event, hook in handlers(gemini):
        assert hook["type"] == "command" and hook["timeout"] >= 1000  # milliseconds
        command_of(hook, "gemini")
    telemetry = gemini["telemetry"]
    assert telemetry["otlpProtocol"] == "http" and telemetry["logPrompts"] is False
    assert urlsplit(telemetry["otlpEndpoint"]).port == 4318
    assert gemini["privacy"]["usageStatisticsEnabled"] is False


def test_claude_code_otel_environment() -> None:
    sh = blocks("sh")[1]
    env = dict(shlex.split(line)[1].split("=", 1) for line in sh.splitlines() if line)
    assert env["OTEL_LOGS_EXPORTER"] == "otlp"
    assert env["OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"] == "http/protobuf"
    assert urlsplit(env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]).path == "/v1/logs"
    attrs = dict(kv.split("=") for kv in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    assert attrs == {"harness.id": "h01", "harness.project": "atlas"}


def test_codex_otel_table_and_serve_table() -> None:
    codex, serve = (tomllib.loads(b) for b in blocks("toml"))
    exporter = codex["otel"]["exporter"]["otlp-http"]
    assert urlsplit(exporter["endpoint"]).path == "/v1/logs"
    assert exporter["protocol"] == "binary"
    assert codex["otel"]["log_user_prompt"] is False
    config = parse_config(blocks("toml")[1])  # the strict loader accepts the [serve] snippet
    assert config.serve.listen == serve["serve"]["listen"] == "127.0.0.1:4318"
    assert config.serve.max_body == 4 * 1024 * 1024 and config.serve.loop_guard == 8
    assert (config.serve.gate_wait_ms, config.serve.merge_wait_ms) == (250, 1500)
    assert (config.serve.drain_timeout_ms, config.serve.max_connections) == (10_000, 256)


def test_the_install_link_is_what_the_unit_starts_and_the_log_dir_exists_first() -> None:
    install = shlex.split(blocks("sh")[0].replace("&&", ";").split(";")[1])
    assert install[:2] == ["ln", "-sf"] and install[2].endswith("/.venv/bin/harness")
    link = install[3]
    (unit,) = blocks("ini")
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit)
    exec_start = shlex.split(parser["Service"]["ExecStart"])
    assert exec_start[0].replace("%h", "~") == link and exec_start[1:] == ["serve"]
    assert parser["Service"]["KillSignal"] == "SIGTERM"
    mkdir, nohup, _kill = blocks("sh")[2].splitlines()
    log = shlex.split(nohup)[3].lstrip(">")
    assert shlex.split(nohup)[:3] == ["nohup", "harness", "serve"]
    assert shlex.split(mkdir)[:2] == ["mkdir", "-p"] and log.startswith(shlex.split(mkdir)[2])
