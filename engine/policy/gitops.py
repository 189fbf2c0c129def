"""Thin, explicit wrappers over the git CLI.

We shell out to git rather than reimplement it: the operator's checkout, its
credentials and hooks are git's business. Every call has a timeout, no shell,
and failures become :class:`PolicyError` with git's own words, never a
traceback.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.errors import HarnessError

GIT_TIMEOUT_S = 120


class PolicyError(HarnessError):
    """A policy repo cannot be synced or prepared as asked."""

    title = "Policy repo"
    exit_code = 1


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT_S,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run ``git -C repo args…`` and return stdout (stripped)."""
    full_env = _git_env()
    if env:
        full_env.update(env)
    try:
        proc = subprocess.run(
            ["git", "-c", "protocol.ext.allow=never", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=full_env,
            input=stdin,
        )
    except FileNotFoundError:
        raise PolicyError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise PolicyError(f"git {' '.join(args)} timed out after {timeout:g}s in {repo}") from None
    if check and proc.returncode != 0:
        detail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line]
        said = " | ".join(detail[-4:]) if detail else f"exit status {proc.returncode}"
        raise PolicyError(f"git {' '.join(args)} failed in {repo}: {said}")
    return proc.stdout.strip()


def check_remote(url: str, field: str) -> str:
    """Refuse a remote that git would read as an option or a command transport.

    The URL comes from harness.toml, but it reaches git's command line, so an
    ``--upload-pack=…`` "URL" or an ``ext::`` transport must never run anything.
    """
    if not url or url.startswith("-") or any(c in url for c in "\n\r\x00"):
        raise PolicyError(f"{field}: {url!r} is not a usable git remote")
    if url.lower().startswith("ext::"):
        raise PolicyError(f"{field}: the ext:: transport runs commands; it is refused")
    return url


def check_branch(name: str, field: str) -> str:
    if not name or name.startswith("-") or ".." in name or any(c in name for c in " ~^:?*[\\"):
        raise PolicyError(f"{field}: {name!r} is not a valid branch name")
    return name


def _git_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # never hang waiting for a password
    env.setdefault("LC_ALL", "C")
    return env


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
        env=_git_env(),
    )
    return proc.returncode == 0
