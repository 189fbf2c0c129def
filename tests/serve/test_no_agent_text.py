"""No agent text: planted strings in every text field reach no store file, log or metric."""

from __future__ import annotations

import json
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from tests.serve.conftest import FIXTURES, Serve

#: Keys whose values are identifiers or paths by design (stored on purpose).
KEEP = {"hook_event_name", "session_id", "tool_name", "cwd", "file_path", "notebook_path"}


def plant(value: object, mark: str, found: list[str]) -> object:
    """Replace every string (except identifiers/paths) with one carrying a unique marker."""
    if isinstance(value, dict):
        return {k: (v if k in KEEP else plant(v, f"{mark}.{k}", found)) for k, v in value.items()}
    if isinstance(value, list):
        return [plant(v, f"{mark}.{i}", found) for i, v in enumerate(value)]
    if isinstance(value, str):
        secret = f"PLANTED{len(found):04d}XQ"
        found.append(secret)
        return f"{value} {secret}\nlast line {secret}"
    return value


def test_planted_strings_reach_no_store_file_log_or_metric(serve: Serve) -> None:
    secrets: list[str] = []
    for path in sorted(FIXTURES.glob("*.json")):
        payload = plant(json.loads(path.read_text()), path.stem, secrets)
        payload["tool_input"] = plant(  # type: ignore[index]
            {
                "file_path": "/home/dev/src/atlas/a.py",
                "old_string": "x",
                "new_string": "y",
                "command": "echo hi",
            },
            "ti",
            secrets,
        )
        status, _ = serve.hook(payload, "n01")  # type: ignore[arg-type]
        assert status == 200
    failure = plant(json.loads((FIXTURES / "PostToolUseFailure.json").read_text()), "f", secrets)
    assert serve.hook(failure, "n01")[0] == 200  # type: ignore[arg-type]
    provider = LoggerProvider(
        resource=Resource.create({"service.name": "claude-code", "harness.id": "n02"})
    )
    provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=serve.base + "/v1/logs"))
    )
    logger = provider.get_logger("planted")
    for name in (
        "claude_code.tool_result",
        "codex.tool_result",
        "claude_code.user_prompt",
        "claude_code.api_error",
    ):
        attrs = plant(
            {
                "tool_parameters": json.dumps({"command": "ls"}),
                "tool_input": json.dumps({"command": "ls"}),
                "arguments": "{}",
                "output": "out",
                "error": "boom",
                "prompt": "do it",
                "decision": "x",
                "model": "m",
            },
            name,
            secrets,
        )
        attrs.update({"tool_name": "Bash", "success": "false", "session.id": "sess-n"})
        logger.emit(body=name, attributes=attrs)  # type: ignore[arg-type]
    provider.shutdown()
    serve.wait_rows(4, "harness IN ('n01', 'n02') AND type = 'tool_call'")
    metrics = serve.request("/metrics")[1]
    time.sleep(1.2)  # one flush of serve's counters
    blobs = {"metrics": metrics, "log": serve.log.read_bytes()}
    for suffix in ("", "-wal", "-shm"):
        file = Path(f"{serve.store}{suffix}")
        if file.exists():
            blobs[file.name] = file.read_bytes()
    assert len(secrets) > 40
    for where, blob in blobs.items():
        leaked = [s for s in secrets if s.encode() in blob]
        assert not leaked, f"{where} holds planted text {leaked[:3]}"
    assert b"PLANTED" not in b"".join(blobs.values())
    # and the rows themselves did arrive (the test would be vacuous otherwise)
    assert serve.rows("harness = 'n02' AND type = 'tool_call'")
    assert serve.rows("harness = 'n01' AND cause_digest IS NOT NULL")
