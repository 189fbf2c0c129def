"""Runs the real Claude Code, Codex CLI or Gemini CLI, isolated, against a fake model API."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.e2e import _npm
from tests.e2e._config import (
    Hook,
    Otlp,
    claude_otel_env,
    claude_settings,
    codex_hooks_json,
    codex_otel_toml,
    gemini_hooks_block,
    gemini_telemetry,
)
from tests.e2e._fake_claude import FakeAnthropic
from tests.e2e._fake_codex import MODEL as CODEX_MODEL
from tests.e2e._fake_codex import FakeResponses
from tests.e2e._fake_gemini import MODEL as GEMINI_MODEL
from tests.e2e._fake_gemini import FakeGemini
from tests.e2e._fakeserver import BackgroundServer, FakeModel
from tests.e2e._script import Recording, Script, ToolCallRecord, Vendor

PROMPT = "Run the scripted steps. PROMPTMARK_e2e0"
TAIL = 6000
# how long a client's leftover processes (fire-and-forget hooks) may take after it exits
GROUP_GRACE_S = 5.0


@dataclass(frozen=True)
class RunResult:
    """What one run of a real client did: its exit, its output tails, what the fake saw."""

    client: Vendor
    returncode: int
    timed_out: bool
    stdout: str
    stderr: str
    duration_s: float
    ended_at: float
    recording: Recording
    workdir: Path
    home: Path

    @property
    def calls(self) -> tuple[ToolCallRecord, ...]:
        return self.recording.calls

    def check(self) -> RunResult:
        """Raises with both output tails when the client did not exit 0."""
        if self.returncode != 0 or self.timed_out:
            raise AssertionError(
                f"{self.client} exited {self.returncode} (timed out: {self.timed_out})\n"
                f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
            )
        return self


@dataclass(frozen=True)
class Layout:
    """The folders of one isolated run: the project the agent works in, and its fake HOME."""

    workdir: Path
    home: Path

    @classmethod
    def under(cls, base: Path, workdir: Path | None = None) -> Layout:
        layout = cls(workdir or base / "work", base / "home")
        layout.workdir.mkdir(parents=True, exist_ok=True)
        layout.home.mkdir(parents=True, exist_ok=True)
        return layout


def base_env(home: Path) -> dict[str, str]:
    """A clean environment: nothing inherited but PATH, so no real key or config leaks in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "SHELL": shutil.which("bash") or "/bin/sh",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }


def run_claude(
    script: Script,
    base: Path,
    *,
    hooks: Iterable[Hook] = (),
    otlp: Otlp | None = None,
    prompt: str = PROMPT,
    workdir: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    args: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> RunResult:
    """``claude -p PROMPT --dangerously-skip-permissions`` in ``base/work``, HOME ``base/home``."""
    layout = Layout.under(base, workdir)
    config_dir = layout.home / ".claude"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "settings.json").write_text(json.dumps(claude_settings(hooks), indent=1))
    fake = FakeAnthropic(script, str(layout.workdir))
    with BackgroundServer(fake.app()) as server:
        full_env = base_env(layout.home) | {
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "dummy",
            # Claude Code refuses --dangerously-skip-permissions as root without it.
            "IS_SANDBOX": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        full_env |= claude_otel_env(otlp) if otlp else {}
        argv = [str(_npm.install(_npm.CLAUDE)), "-p", prompt, "--dangerously-skip-permissions"]
        return _run("claude", [*argv, *args], layout, _merge(full_env, env), fake, timeout_s)


def codex_config(base_url: str, otlp: Otlp | None) -> str:
    """``$CODEX_HOME/config.toml``: the fake as a custom model provider, no update check."""
    text = (
        f'model = "{CODEX_MODEL}"\n'
        'model_provider = "e2e"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        "check_for_update_on_startup = false\n\n"
        # without these Codex contacts github.com, api.github.com and chatgpt.com (plugin
        # catalogue) and ab.chatgpt.com (its own metrics) on every run
        "[features]\nplugins = false\n\n"
        "[analytics]\nenabled = false\n\n"
        "[model_providers.e2e]\n"
        'name = "e2e fake"\n'
        f'base_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "E2E_FAKE_OPENAI_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n\n"
    )
    return text + (codex_otel_toml(otlp) if otlp else "")


def run_codex(
    script: Script,
    base: Path,
    *,
    hooks: Iterable[Hook] = (),
    otlp: Otlp | None = None,
    prompt: str = PROMPT,
    workdir: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    args: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> RunResult:
    """``codex exec --dangerously-bypass-approvals-and-sandbox --dangerously-bypass-hook-trust``."""
    layout = Layout.under(base, workdir)
    codex_home = layout.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    hooks = tuple(hooks)
    if hooks:
        (codex_home / "hooks.json").write_text(json.dumps(codex_hooks_json(hooks), indent=1))
    fake = FakeResponses(script, str(layout.workdir))
    with BackgroundServer(fake.app()) as server:
        (codex_home / "config.toml").write_text(codex_config(server.url, otlp))
        full_env = base_env(layout.home) | {
            "CODEX_HOME": str(codex_home),
            "E2E_FAKE_OPENAI_KEY": "dummy",
        }
        full_env |= (otlp.resource_env() | otlp.headers_env()) if otlp else {}
        argv = [str(_npm.install(_npm.CODEX)), "exec", "--skip-git-repo-check"]
        argv += ["--dangerously-bypass-approvals-and-sandbox"]
        # codex exec skips hooks that were never trusted (interactively) without it.
        argv += ["--dangerously-bypass-hook-trust", *args, prompt]
        return _run("codex", argv, layout, _merge(full_env, env), fake, timeout_s)


def gemini_settings(hooks: Iterable[Hook], otlp: Otlp | None) -> dict[str, object]:
    """``~/.gemini/settings.json``: API-key auth, no update or usage traffic, hooks, telemetry."""
    settings: dict[str, object] = {
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": GEMINI_MODEL},
    }
    hooks = tuple(hooks)
    if hooks:
        settings["hooks"] = gemini_hooks_block(hooks)
    settings["telemetry"] = gemini_telemetry(otlp) if otlp else {"enabled": False}
    return settings


def run_gemini(
    script: Script,
    base: Path,
    *,
    hooks: Iterable[Hook] = (),
    otlp: Otlp | None = None,
    prompt: str = PROMPT,
    workdir: Path | None = None,
    env: Mapping[str, str | None] | None = None,
    args: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> RunResult:
    """``gemini -p PROMPT --yolo`` with ``~/.gemini/settings.json`` in the fake HOME."""
    layout = Layout.under(base, workdir)
    gemini_dir = layout.home / ".gemini"
    gemini_dir.mkdir(exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps(gemini_settings(hooks, otlp), indent=1))
    fake = FakeGemini(script, str(layout.workdir))
    with BackgroundServer(fake.app()) as server:
        full_env = base_env(layout.home) | {
            "GOOGLE_GEMINI_BASE_URL": server.url,
            "GEMINI_API_KEY": "dummy",
            # an untrusted folder turns --yolo back into "default" approval
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        full_env |= (otlp.resource_env() | otlp.headers_env()) if otlp else {}
        argv = [str(_npm.install(_npm.GEMINI)), "-p", prompt, "--yolo", *args]
        return _run("gemini", argv, layout, _merge(full_env, env), fake, timeout_s)


def _merge(env: dict[str, str], extra: Mapping[str, str | None] | None) -> dict[str, str]:
    """``env`` updated by ``extra``, where a value of None removes the variable."""
    merged = dict(env)
    for key, value in (extra or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _run(
    client: Vendor,
    argv: list[str],
    layout: Layout,
    env: dict[str, str],
    fake: FakeModel,
    timeout_s: float,
) -> RunResult:
    out_path = layout.home / f"{client}.stdout"
    err_path = layout.home / f"{client}.stderr"
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            argv,
            cwd=layout.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            ended_at = time.monotonic()
            _end_group(process, grace_s=0.0 if timed_out else GROUP_GRACE_S)
    return RunResult(
        client=client,
        returncode=process.returncode,
        timed_out=timed_out,
        stdout=_tail(out_path),
        stderr=_tail(err_path),
        duration_s=ended_at - started,
        ended_at=ended_at,
        recording=fake.recording(),
        workdir=layout.workdir,
        home=layout.home,
    )


def _end_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """Waits up to ``grace_s`` for what the client left running in its process group (a
    SessionEnd hook it does not wait for), then kills whatever is left."""
    deadline = time.monotonic() + grace_s
    if process.poll() is not None:
        while time.monotonic() < deadline and _group_alive(process.pid):
            time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _tail(path: Path) -> str:
    data = path.read_bytes()
    return data[-TAIL:].decode("utf-8", "replace")
