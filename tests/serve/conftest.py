"""A real ``harness serve`` subprocess on a free loopback port, one per test module."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
HOLD_RULE = """\
name: serve_test_hold
description: A harness ran the forbidden tool.
on: run_event
when: event.type == "tool_call" && event.tool == "Forbidden"
level: hold
target: harness
cooldown: 0s
message: "{harness} ran {tool}"
"""
STOP_RULE = """\
name: serve_test_stop
description: A harness ran the halting tool.
on: run_event
when: event.type == "tool_call" && event.tool == "Halt"
level: stop
target: harness
cooldown: 0s
message: "{harness} ran {tool}"
"""
CONFIG = """\
[memory.rules]
enforce = ["serve_test_hold", "serve_test_stop"]
shadow_period = "0s"

[serve]
loop_guard = 8
collision_window = "10m"
max_body = "64KiB"
"""


def fixture(name: str) -> dict[str, object]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    port: int
    store: Path
    log: Path
    env: dict[str, str]
    token: str | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        method: str | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        hdrs = dict(headers or {})
        if self.token and "Authorization" not in hdrs:
            hdrs["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base + path, data=body, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), dict(exc.headers)

    def hook(self, payload: dict[str, object], harness: str = "h01") -> tuple[int, object]:
        status, body, _ = self.request(
            f"/hooks/claude-code?harness={harness}&project=atlas",
            json.dumps(payload).encode(),
            {"Content-Type": "application/json"},
        )
        return status, (json.loads(body) if status == 200 else body.decode())

    def rows(self, where: str = "kind != 'tick'", params: tuple[object, ...] = ()) -> list[dict]:
        conn = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [
                dict(r)
                for r in conn.execute(
                    f"SELECT * FROM rule_journal WHERE {where} ORDER BY seq", params
                )
            ]
        finally:
            conn.close()

    def wait_rows(self, n: int, where: str = "kind != 'tick'", timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.rows(where)
            if len(rows) >= n or time.monotonic() > deadline:
                return rows
            time.sleep(0.05)

    def harness_cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engine.cli.harness", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode


def serve_env(tmp: Path, config: str = CONFIG) -> dict[str, str]:
    cfg = tmp / "harness.toml"
    cfg.write_text(config)
    env = dict(os.environ)
    env["HARNESS_CONFIG"] = str(cfg)
    env["PYTHONPATH"] = str(ROOT)
    env["XDG_STATE_HOME"] = str(tmp / "state")
    return env


def start_serve(
    tmp: Path,
    *,
    config: str = CONFIG,
    listen: str = "127.0.0.1:0",
    token: str | None = None,
    extra: tuple[str, ...] = (),
    store: Path | None = None,
    preexec: Callable[[], None] | None = None,
) -> Serve:
    """Serve on ``store`` (default ``tmp/journal.db``); its config, rules and log in ``tmp``.

    ``preexec`` runs in the child before serve starts (e.g. to lower its file limit).
    """
    policy = tmp / "policy"
    policy.mkdir(exist_ok=True)
    (policy / "serve_test_hold.yml").write_text(HOLD_RULE)
    (policy / "serve_test_stop.yml").write_text(STOP_RULE)
    env = serve_env(tmp, config)
    store = store or tmp / "journal.db"
    log = tmp / "serve.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine.cli.harness",
                "serve",
                "--store",
                str(store),
                "--listen",
                listen,
                "--policy",
                str(policy),
                *extra,
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp,
            preexec_fn=preexec,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        m = re.search(r"listening on http://[^:]+:(\d+)", text)
        if m:
            return Serve(proc, int(m.group(1)), store, log, env, token)
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {text}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not start: " + log.read_text(errors="replace"))


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    server = start_serve(tmp_path_factory.mktemp("serve"))
    try:
        yield server
    finally:
        server.stop()
