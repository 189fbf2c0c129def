"""Package file checks: resources, code source files and ``deps.toml`` ledgers.

A spec's resources and code files are part of the skill package, so the
reference requires each to exist *inside* the skill folder: a ``..`` path is
an error even when the file exists (``../prose_only/SKILL.md`` fails), while a
URL, a ``~/`` path or an absolute path is not a package file and is skipped.
A ``deps.toml`` ledger must also be non-empty. Every failure is reported per
field, with the location of the path value.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.capped import CappedReadError, path_refusal, read_capped
from engine.errors import Diagnostic, Location
from engine.yamlsrc import MAX_BYTES, LocDict

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any

DEPENDENCY_LEDGER_ID = "dependency_ledger"
DEPS_TOML = "deps.toml"


class UnreadableFile(Exception):
    """A file the checker will not read; ``reason`` is a short phrase for a diagnostic."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_regular_file(path: str | Path, cap: int = MAX_BYTES) -> bytes:
    """At most ``cap`` bytes of a regular file, or :class:`UnreadableFile`.

    Why: a path named in a spec is author data and may point anywhere (a
    symlink to ``/dev/zero``, a FIFO, a multi-gigabyte file), so the read is
    :func:`engine.capped.read_capped`'s (``cap`` is ``MAX_BYTES``, 4 MiB, like
    a spec itself); this only words its refusal as a short diagnostic phrase.
    """
    refusal = path_refusal(os.fspath(path))
    if refusal is not None:
        raise UnreadableFile(refusal)
    try:
        return read_capped(path, cap)
    except CappedReadError as exc:
        if exc.kind in ("directory", "not_regular"):
            raise UnreadableFile(
                f"{exc.reason}, not a regular file; only regular files are read"
            ) from None
        if exc.kind == "too_large" and exc.size is not None:
            raise UnreadableFile(f"file is larger than {cap} bytes ({exc.size} bytes)") from None
        if exc.kind == "too_large":
            raise UnreadableFile(f"file is larger than {cap} bytes") from None
        raise UnreadableFile(exc.reason) from None


def _where(mapping: Any, key: str, fallback: Location) -> Location:
    return mapping.where_value(key) if isinstance(mapping, LocDict) else fallback


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Sidecars:
    def __init__(self, spec_path: Path) -> None:
        self.spec_dir = spec_path.parent
        self.file = str(spec_path)
        self.errors: list[Diagnostic] = []

    def fail(self, field: str, message: str, loc: Location, code: str) -> None:
        self.errors.append(Diagnostic(message, loc, path=field, code=code))

    def check(self, field: str, raw: str, loc: Location, non_empty: bool = False) -> None:
        text = raw.strip()
        if not text or "://" in text or text.startswith("~/") or os.path.isabs(text):
            return  # not a package file: the reference does not look at it
        refusal = path_refusal(text)
        if refusal is not None:
            self.fail(field, refusal, loc, "bad_path")
            return
        if ".." in Path(text).parts:
            self.fail(field, f"{raw} must stay within the skill folder", loc, "outside_package")
            return
        target = self.spec_dir / text
        try:
            st = target.stat()
        except (OSError, ValueError) as exc:  # ValueError: joined, the path is still refused
            reason = getattr(exc, "strerror", None) or str(exc)
            self.fail(field, f"{raw} missing ({reason})", loc, "missing_file")
            return
        if not stat.S_ISREG(st.st_mode):
            self.fail(field, f"{raw} is not a file", loc, "not_a_file")
        elif non_empty and st.st_size == 0:
            self.fail(field, f"{raw} exists but is empty", loc, "empty_file")


def check_sidecars(data: dict[str, Any], spec_path: str | Path) -> list[Diagnostic]:
    """Every resource, code file and deps ledger problem of a parsed spec."""
    s = _Sidecars(Path(spec_path))
    root = data.pos if isinstance(data, LocDict) else Location(s.file)
    deps_value = data.get("dependencies")
    deps: dict[str, Any] = deps_value if isinstance(deps_value, dict) else {}
    for key in sorted(deps):
        dep = deps[key]
        if not isinstance(dep, dict) or dep.get("kind") != "file":
            continue
        check_value = dep.get("check")
        check: dict[str, Any] = check_value if isinstance(check_value, dict) else {}
        raw = _str(check.get("path")) or _str(dep.get("path"))
        where = (
            _where(check, "path", root) if _str(check.get("path")) else _where(dep, "path", root)
        )
        if raw is None:
            continue
        if key == DEPENDENCY_LEDGER_ID or raw.endswith(DEPS_TOML):
            s.check(f"dependencies.{key}", raw, where, non_empty=raw.endswith(DEPS_TOML))
    resources = data.get("resources")
    resources = resources if isinstance(resources, dict) else {}
    for key in sorted(resources):
        res = resources[key]
        if isinstance(res, dict) and _str(res.get("path")) is not None:
            s.check(f"resources.{key}", res["path"], _where(res, "path", root))
    code_value = data.get("code")
    code: dict[str, Any] = code_value if isinstance(code_value, dict) else {}
    for key in sorted(code):
        block = code[key]
        source = block.get("source") if isinstance(block, dict) else None
        if not isinstance(source, dict) or _str(source.get("file")) is None:
            continue
        field = f"code.{key}.source.file"
        s.check(field, source["file"], _where(source, "file", root))
        res_id = _str(source.get("from_resource"))
        res = resources.get(res_id) if res_id is not None else None
        if isinstance(res, dict) and _str(res.get("path")) not in (None, source["file"]):
            s.fail(
                f"code.{key}.source.from_resource",
                f'resource "{res_id}" path {res["path"]} does not match code file {source["file"]}',
                _where(source, "from_resource", root),
                "resource_mismatch",
            )
    return s.errors
