"""The command hook hands its call to a running serve, and handles it itself only when it must."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote as stdlib_quote

from hypothesis import given
from hypothesis import strategies as st

from engine.serve.forward import quote
from tests.serve.conftest import ROOT, fixture, start_serve


@given(st.text(), st.sampled_from(["", "/"]))
def test_quote_is_urllib_quote(text: str, safe: str) -> None:
    assert quote(text, safe) == stdlib_quote(text, safe=safe)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hook(config: Path, payload: object, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", "hook", "codex", "--harness", "f01", *args],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={"HARNESS_CONFIG": str(config), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        cwd=ROOT,
    )


def count(store: Path, harness: str = "f01") -> int:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM rule_journal WHERE harness = ? AND type = 'tool_call'",
                (harness,),
            ).fetchone()[0]
        )
    finally:
        conn.close()


def test_a_command_hook_forwards_to_serve_so_both_sources_meet_in_one_process(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = f'[serve]\nlisten = "127.0.0.1:{port}"\n'
    serve = start_serve(tmp_path, config=config, listen=f"127.0.0.1:{port}")
    try:
        (tmp_path / "hook.toml").write_text(f'[store]\npath = "{serve.store}"\n' + config)
        post = dict(fixture("PostToolUse"), tool_name="Bash", tool_input={"command": "make"})
        post["tool_use_id"] = "call_9"
        done = hook(tmp_path / "hook.toml", post)
        assert done.returncode == 0 and done.stdout == "{}\n", done.stderr
        assert count(serve.store) == 1  # written by serve (acknowledged after its commit)
        # the same call over OTLP is then a duplicate: serve saw the hook's report
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )

        request = ExportLogsServiceRequest()
        rl = request.resource_logs.add()
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = "harness.id", "f01"
        rec = rl.scope_logs.add().log_records.add()
        for key, value in (
            ("event.name", "codex.tool_result"),
            ("tool_name", "exec_command"),
            ("call_id", "call_9"),
            ("conversation.id", str(post["session_id"])),
            ("success", "true"),
        ):
            a = rec.attributes.add()
            a.key, a.value.string_value = key, value
        status, _, _ = serve.request(
            "/v1/logs", request.SerializeToString(), {"Content-Type": "application/x-protobuf"}
        )
        assert status == 200 and count(serve.store) == 1
        # a hook naming another store is refused by serve (409) and handles the call itself
        other = tmp_path / "other.db"
        done = hook(tmp_path / "hook.toml", post, "--store", str(other))
        assert done.returncode == 0, done.stderr
        assert count(other) == 1 and count(serve.store) == 1
    finally:
        assert serve.stop() == 0


def test_without_serve_the_command_hook_journals_the_call_itself(tmp_path: Path) -> None:
    store = tmp_path / "j.db"
    config = tmp_path / "hook.toml"
    config.write_text(f'[store]\npath = "{store}"\n[serve]\nlisten = "127.0.0.1:{free_port()}"\n')
    done = hook(config, dict(fixture("PostToolUse"), tool_name="Bash"))
    assert done.returncode == 0 and done.stdout == "{}\n", done.stderr
    assert count(store) == 1
