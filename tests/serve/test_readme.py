"""Every snippet of the README's "Connect your agents" section parses and fits serve."""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from engine.config import parse_config

README = Path(__file__).resolve().parents[2] / "README.md"


def section() -> str:
    text = README.read_text()
    start = text.index("## Connect your agents")
    return text[start : text.index("\n## ", start + 3)]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), flags=re.S)


def test_claude_code_settings_hooks_block() -> None:
    (block,) = blocks("json")
    settings = json.loads(block)
    events = settings["hooks"]
    for event in (
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
    ):
        for group in events[event]:
            for hook in group["hooks"]:
                assert hook["type"] == "http"
                url = urlsplit(hook["url"])
                assert (url.hostname, url.port, url.path) == (
                    "127.0.0.1",
                    4318,
                    "/hooks/claude-code",
                )
                assert parse_qs(url.query)["harness"] == ["h01"]


def test_claude_code_otel_environment() -> None:
    sh = blocks("sh")[0]
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


def test_systemd_unit_and_background() -> None:
    (unit,) = blocks("ini")
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit)
    assert shlex.split(parser["Service"]["ExecStart"])[1:] == ["serve"]
    assert parser["Service"]["KillSignal"] == "SIGTERM"
    background = blocks("sh")[1]
    first = shlex.split(background.splitlines()[0])
    assert first[:3] == ["nohup", "harness", "serve"]
