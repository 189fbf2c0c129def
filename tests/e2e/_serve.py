"""A real ``harness serve`` for the end-to-end suite: the gate the real clients talk to.

One serve per test module, on a fixed free loopback port named in its
``harness.toml`` (so a command hook finds it and forwards to it), with rules
that act on what real calls look like in the journal:

- ``e2e_hold_on_failure``: a harness whose id starts ``once-`` is held when a
  shell command fails;
- ``e2e_hold_on_second_failure``: a ``twice-`` harness is held at its second
  failed command (so a call counted twice would hold it at the first);
- ``e2e_hold_on_marker``: a harness that writes ``hold-here.txt`` is held
  (a trigger every agent's hooks see, Codex's included);
- ``e2e_stop_on_marker``: a run that writes a file named ``stop-here.txt`` is
  stopped.

All are enforced, with no shadow period, so they act at once.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HARNESS = Path(sys.executable).parent / "harness"
RULES = {
    "e2e_hold_on_failure.yml": """\
name: e2e_hold_on_failure
description: A once- harness ran a shell command that failed.
on: run_event
when: >-
  event.type == "tool_call" && event.tool == "Bash" && event.outcome == "error" &&
  event.harness.startsWith("once-")
level: hold
target: harness
cooldown: 0s
message: "{harness}: a shell command failed"
""",
    "e2e_hold_on_second_failure.yml": """\
name: e2e_hold_on_second_failure
description: A twice- harness ran a second failing shell command within the hour.
on: run_event
when: >-
  event.type == "tool_call" && event.outcome == "error" && event.harness.startsWith("twice-") &&
  count({"harness": event.harness, "type": "tool_call", "outcome": "error"},
        duration("1h")) >= 2
level: hold
target: harness
cooldown: 0s
message: "{harness}: a second command failed"
""",
    "e2e_hold_on_marker.yml": """\
name: e2e_hold_on_marker
description: A harness wrote the hold marker file.
on: run_event
when: >-
  event.type == "tool_call" && event.tool in ["Write", "Edit"] &&
  event.path.endsWith("/hold-here.txt")
level: hold
target: harness
cooldown: 0s
message: "{harness} wrote the hold marker"
""",
    "e2e_stop_on_marker.yml": """\
name: e2e_stop_on_marker
description: A run wrote the stop marker file.
on: run_event
when: >-
  event.type == "tool_call" && event.tool in ["Write", "Edit"] &&
  event.path.endsWith("/stop-here.txt")
level: stop
target: harness
cooldown: 0s
message: "{harness} wrote the stop marker"
""",
}
LOOP_GUARD = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class E2EServe:
    """A running serve, its store and config, and the hook commands that reach it."""

    proc: subprocess.Popen[bytes]
    port: int
    store: Path
    config: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What an agent's environment needs so its command hooks find this serve."""
        return {"HARNESS_CONFIG": str(self.config)}

    def command(self, agent: str, harness: str) -> str:
        return f"{HARNESS} hook {agent} --harness {harness} --project e2e"

    def hook_url(self, harness: str) -> str:
        return f"{self.url}/hooks/claude-code?harness={harness}&project=e2e"

    def rows(self, harness: str, typ: str | None = None) -> list[dict[str, Any]]:
        conn = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            sql = "SELECT * FROM rule_journal WHERE harness = ?"
            args: tuple[Any, ...] = (harness,)
            if typ is not None:
                sql += " AND type = ?"
                args += (typ,)
            return [dict(r) for r in conn.execute(sql + " ORDER BY seq", args)]
        finally:
            conn.close()

    def holds(self, harness: str) -> list[dict[str, Any]]:
        out = self.cli("holds", "list", "--json")
        return [h for h in json.loads(out)["holds"] if h["harness"] == harness]

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [str(HARNESS), *args, "--store", str(self.store)],
            capture_output=True,
            text=True,
            env={"HARNESS_CONFIG": str(self.config), "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def metric(self, name: str, **labels: str) -> float:
        import urllib.request

        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in labels.items())
        for line in text.splitlines():
            if line.startswith(f"{name}{{{want}}} ") or (not want and line.startswith(name + " ")):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start(base: Path, *, loop_guard: int = LOOP_GUARD, port: int | None = None) -> E2EServe:
    """Serve on ``base``'s store and config (written once, kept on a restart); waits for it."""
    base.mkdir(parents=True, exist_ok=True)
    policy = base / "policy"
    policy.mkdir(exist_ok=True)
    for name, text in RULES.items():
        (policy / name).write_text(text)
    port = port or free_port()
    store = base / "journal.db"
    config = base / "harness.toml"
    config.write_text(
        f'[store]\npath = "{store}"\n\n'
        "[memory.rules]\n"
        'enforce = ["e2e_hold_on_failure", "e2e_hold_on_second_failure", "e2e_hold_on_marker", '
        '"e2e_stop_on_marker"]\n'
        'shadow_period = "0s"\n\n'
        f'[serve]\nlisten = "127.0.0.1:{port}"\nloop_guard = {loop_guard}\n'
        'merge_wait = "3s"\n'
    )
    log = base / "serve.log"
    env = {"HARNESS_CONFIG": str(config), "PATH": "/usr/bin:/bin", "HOME": str(base)}
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            [str(HARNESS), "serve", "--policy", str(policy)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if re.search(r"listening on http://", log.read_text(errors="replace")):
            return E2EServe(proc, port, store, config, log)
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not start: " + log.read_text(errors="replace"))
