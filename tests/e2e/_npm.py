"""Installs the pinned agent CLIs from npm into a cache folder, once, for the end-to-end suite."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_TIMEOUT_S = 900
MARKER = ".harness-e2e-installed"


@dataclass(frozen=True)
class Client:
    """One pinned npm package and the binary it provides: the suite runs exactly these versions."""

    package: str
    version: str
    binary: str

    @property
    def slug(self) -> str:
        """A folder name: ``@anthropic-ai/claude-code`` -> ``anthropic-ai+claude-code``."""
        return self.package.lstrip("@").replace("/", "+")

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


CLAUDE = Client("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = Client("@openai/codex", "0.171.0", "codex")
GEMINI = Client("@google/gemini-cli", "0.61.0", "gemini")


def cache_root() -> Path:
    """``$HARNESS_E2E_CACHE``, else ``~/.cache/harness-console/e2e`` of the real user.

    The suite's autouse fixture points ``HOME`` at a temp folder, so the default is taken
    from the password database, not from ``HOME``: the cache must outlive a test.
    """
    explicit = os.environ.get("HARNESS_E2E_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    import pwd

    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    return home / ".cache" / "harness-console" / "e2e"


def _optional() -> bool:
    return os.environ.get("HARNESS_E2E_OPTIONAL", "") not in ("", "0")


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def install(client: Client) -> Path:
    """The path of ``client``'s binary, installing it first when the cache lacks it.

    Skips (saying why) when node or npm is absent. A failed install fails the test with
    npm's stderr tail, so CI never skips the suite silently; ``HARNESS_E2E_OPTIONAL=1``
    turns that failure into a skip.
    """
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(
            "node/npm not on PATH: the end-to-end suite needs them to install the real CLIs"
        )
    prefix = cache_root() / f"{client.slug}@{client.version}"
    binary = prefix / "node_modules" / ".bin" / client.binary
    if (prefix / MARKER).is_file() and binary.exists():
        return binary
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"{client.slug}@{client.version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second pytest process waits here, then reuses it
        if (prefix / MARKER).is_file() and binary.exists():
            return binary
        shutil.rmtree(prefix, ignore_errors=True)  # a half-done install from a killed run
        prefix.mkdir(parents=True)
        failure = _npm_install(npm, prefix, client)
        if failure is None and not binary.exists():
            failure = f"npm reported success but {binary} does not exist"
        if failure is not None:
            message = f"npm install {client.spec} failed:\n{failure}"
            if _optional():
                pytest.skip(f"HARNESS_E2E_OPTIONAL is set; {message}")
            pytest.fail(message, pytrace=False)
        (prefix / MARKER).write_text(client.spec + "\n", encoding="utf-8")
    return binary


def _npm_install(npm: str, prefix: Path, client: Client) -> str | None:
    """Runs npm; the failure text (stderr tail) or None."""
    argv = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund"]
    argv += ["--loglevel=error", "--save-exact", client.spec]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {INSTALL_TIMEOUT_S}s"
    if done.returncode != 0:
        return f"exit {done.returncode}\n{_tail(done.stderr or done.stdout)}"
    return None
