"""Dependency check: what can be verified locally without running anything.

``cli`` dependencies are looked up on ``PATH`` (the program named by
``check.command``, else ``command``, else the dependency id; only its first
word, and it is never executed), ``file`` dependencies must exist (relative to
the spec's folder; an empty ``deps.toml`` counts as missing), ``env``
dependencies must be set. Packages, services, adapters and browsers cannot be
proven from here, so they are reported as needing a harness check instead of
passing or failing silently. Nothing is ever installed.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.capped import path_refusal
from engine.errors import Location
from engine.yamlsrc import LocDict

HARNESS_KINDS = ("package", "service", "adapter", "browser")
#: What ``Path.exists()`` answers False for (pathlib's own list); others are reported.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


@dataclass(frozen=True)
class DependencyResult:
    id: str
    kind: str
    status: str  # present | missing | deferred
    check: str  # path_lookup | file_exists | env_present | harness_required
    permission_required: bool
    provisionable: bool
    message: str
    location: Location

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "check": self.check,
            "permission_required": self.permission_required,
            "provisionable": self.provisionable,
            "message": self.message,
        }


@dataclass(frozen=True)
class DepsReport:
    dependencies: tuple[DependencyResult, ...]

    @property
    def ok(self) -> bool:
        """Deferred (harness-checked) dependencies do not fail the local check."""
        return all(d.status != "missing" for d in self.dependencies)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "dependencies": [d.to_json() for d in self.dependencies]}


def _text(mapping: Any, key: str) -> str | None:
    if isinstance(mapping, dict) and isinstance(mapping.get(key), str):
        value: str = mapping[key]
        return value
    return None


def _pick(dep: dict[str, Any], key: str, default: str) -> str:
    """``check.<key>``, else ``<key>``, else ``default`` (the reference's precedence)."""
    return _text(dep.get("check"), key) or _text(dep, key) or default


def _file_problem(raw: str, spec_dir: Path) -> str | None:
    """Why the ``file`` dependency at ``raw`` is missing, or None when it is there.

    One ``stat``: a path the OS refuses (a NUL byte, an over-long name) is
    missing with the reason, never an exception out of ``Path.exists()``.
    """
    refusal = path_refusal(raw)
    if refusal is not None:
        return refusal
    target = Path(raw) if os.path.isabs(raw) else spec_dir / raw
    try:
        st = target.stat()
    except OSError as exc:
        if exc.errno in _ABSENT:
            return f"{raw} does not exist"
        return f"{raw} cannot be checked ({exc.strerror or exc})"
    if raw.endswith("deps.toml") and not stat.S_ISREG(st.st_mode):
        # A ledger is read by harnesses: a FIFO, device or directory is no ledger.
        return f"{raw} is not a regular file"
    if raw.endswith("deps.toml") and st.st_size == 0:
        return f"{raw} exists but is empty"
    return None


def check_dependency(dep_id: str, dep: dict[str, Any], spec_dir: Path) -> DependencyResult:
    kind = str(dep.get("kind", ""))
    permission = dep.get("permission")
    provision = dep.get("provision")
    perm = isinstance(permission, dict) and permission.get("required") is True
    prov = isinstance(provision, dict) and bool(provision.get("options"))
    loc = dep.pos if isinstance(dep, LocDict) else Location()
    if kind == "cli":
        command = _pick(dep, "command", dep_id)
        program = command.split()[0] if command.split() else command
        found = shutil.which(program) is not None
        status, method = ("present" if found else "missing"), "path_lookup"
        message = f"{program} found on PATH" if found else f"{program} not found on PATH"
    elif kind == "file":
        raw = _pick(dep, "path", dep_id)
        method = "file_exists"
        problem = _file_problem(raw, spec_dir)
        status, message = ("missing", problem) if problem else ("present", f"{raw} exists")
    elif kind == "env":
        name = _pick(dep, "env", dep_id)
        present = name in os.environ
        status, method = ("present" if present else "missing"), "env_present"
        message = f"{name} is set" if present else f"{name} is not set"
    else:
        status, method = "deferred", "harness_required"
        message = f"{kind} dependency: not locally checkable; needs a harness check before use"
    return DependencyResult(dep_id, kind, status, method, perm, prov, message, loc)


def check_deps(data: dict[str, Any], spec_path: str | Path) -> DepsReport:
    """Check every declared dependency of a parsed spec, in id order."""
    deps = data.get("dependencies")
    deps = deps if isinstance(deps, dict) else {}
    spec_dir = Path(spec_path).parent
    results = tuple(
        check_dependency(key, deps[key], spec_dir)
        for key in sorted(deps)
        if isinstance(deps[key], dict)
    )
    return DepsReport(results)
