"""The listener's defences: no open listener without a token, 401/413/400/415, nothing stored."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import CONFIG, ROOT, Serve, fixture, serve_env, start_serve

TOKEN = "s3cr3t-token-for-tests"


def test_non_loopback_without_token_refuses_to_start(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.harness",
            "serve",
            "--store",
            str(tmp_path / "j.db"),
            "--listen",
            "0.0.0.0:0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "token_file" in result.stderr and "Traceback" not in result.stderr


def test_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "serve.token"
    token.write_text(TOKEN)
    token.chmod(0o644)
    env = serve_env(tmp_path, CONFIG + f'token_file = "{token}"\n')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.harness",
            "serve",
            "--store",
            str(tmp_path / "j.db"),
            "--listen",
            "0.0.0.0:0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2 and "chmod 600" in result.stderr


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("guarded")
    token = tmp / "serve.token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    server = start_serve(tmp, config=CONFIG + f'token_file = "{token}"\n', token=TOKEN)
    try:
        yield server
    finally:
        server.stop()


def stored(server: Serve) -> list[dict]:
    return server.rows()


def test_missing_and_wrong_token_get_401_and_store_nothing(guarded: Serve) -> None:
    body = json.dumps(fixture("PostToolUse")).encode()
    for auth in (
        {"Authorization": ""},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        status, _, _ = guarded.request(
            "/hooks/claude-code?harness=x01", body, {"Content-Type": "application/json", **auth}
        )
        assert status == 401
    assert guarded.request("/metrics", headers={"Authorization": "Bearer nope"})[0] == 401
    assert stored(guarded) == []
    ok, answer, _ = guarded.request(
        "/hooks/claude-code?harness=x01", body, {"Content-Type": "application/json"}
    )
    assert ok == 200 and json.loads(answer) == {}
    assert len(guarded.wait_rows(1)) >= 1


def test_oversize_garbage_and_wrong_type(serve: Serve) -> None:
    big = b"x" * (70 * 1024)  # [serve] max_body is 64KiB in the test config
    assert serve.request("/v1/logs", big, {"Content-Type": "application/x-protobuf"})[0] == 413
    assert (
        serve.request("/hooks/claude-code?harness=z01", big, {"Content-Type": "application/json"})[
            0
        ]
        == 413
    )
    bomb = gzip.compress(b"\0" * (1024 * 1024))
    assert (
        serve.request(
            "/v1/logs", bomb, {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
        )[0]
        == 413
    )
    garbage = b"\xff\x00not protobuf\x12"
    status, text, _ = serve.request("/v1/logs", garbage, {"Content-Type": "application/x-protobuf"})
    assert status == 400 and b"ExportLogsServiceRequest" in text
    assert serve.request("/v1/logs", b"{not json", {"Content-Type": "application/json"})[0] == 400
    assert serve.request("/v1/logs", b"x", {"Content-Type": "text/plain"})[0] == 415
    assert (
        serve.request(
            "/hooks/claude-code?harness=z01", b"[1,", {"Content-Type": "application/json"}
        )[0]
        == 400
    )
    assert (
        serve.request(
            "/hooks/claude-code?harness=z01", b"[]", {"Content-Type": "application/json"}
        )[0]
        == 400
    )
    bad_id = json.dumps(fixture("SessionStart")).encode()
    assert (
        serve.request(
            "/hooks/claude-code?harness=bad%20id", bad_id, {"Content-Type": "application/json"}
        )[0]
        == 400
    )
    huge_header = {"X-Filler": "a" * 20_000, "Content-Type": "application/json"}
    assert serve.request("/hooks/claude-code?harness=z01", bad_id, huge_header)[0] in (400, 431)
    assert serve.rows("harness IN ('z01', 'bad id')") == []


def test_bad_identifiers_are_refused_and_counted_never_stored(serve: Serve) -> None:
    payload = fixture("PostToolUse")
    payload["session_id"] = "not an id; rm -rf /"
    payload["tool_name"] = "Bash\nInjected"
    status, answer = serve.hook(payload, "i01")
    assert status == 200 and answer == {}
    assert serve.rows("harness = 'i01'") == []
    text = serve.request("/metrics")[1].decode()
    assert 'harness_serve_events_total{event="rows_refused"}' in text
