"""Imports: lexical path resolution, Markdown section extraction, the import DAG.

Why lexical: an import path is data written by a skill author and read by a
harness, so we never let the shell or the environment rewrite it. ``~``,
``$VAR``, command substitution, globs, URLs and absolute paths are refused
outright; ``..`` is allowed (the reference's own examples import
``../../README.md``) but reported as leaving the package root, and a path that
passes through a symlink is reported too, because its target can change under
the skill without the spec changing.

A ``section`` selects one Markdown heading and its children, up to the next
heading of the same or a higher level. A named section that is missing fails
closed: the import is an error, never the whole file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from engine.errors import Diagnostic, Location
from engine.record import Record
from engine.skillspec.files import UnreadableFile, read_regular_file
from engine.yamlsrc import LocDict

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, Final

#: Characters a shell would interpret; an import path containing one is refused.
#: (These patterns are compiled where they are used, through ``re``'s cache: a spec without
#: imports, which ``skillspec validate`` meets most, never pays for compiling them.)
_SHELL = r"[$`|;&<>*?\n\r\x00]"
_HEADING = r"^ {0,3}(#{1,6})(?:[ \t]+|$)(.*)$"
_FENCE = r"^ {0,3}(```|~~~)"


class ImportEntry(Record):
    """The outcome for one import. ``status`` follows the reference's names."""

    __slots__ = (
        "error",
        "flags",
        "id",
        "load",
        "location",
        "path",
        "requires",
        "resolved_path",
        "role",
        "section",
        "section_found",
        "section_lines",
        "status",
    )
    __match_args__ = (
        "id",
        "path",
        "resolved_path",
        "role",
        "load",
        "section",
        "section_found",
        "section_lines",
        "requires",
        "status",
        "error",
        "flags",
        "location",
    )

    def __init__(
        self,
        id: str,
        path: str,
        resolved_path: str | None,
        role: str,
        load: str,
        section: str | None,
        section_found: bool | None,
        section_lines: int | None,
        requires: tuple[str, ...],
        status: str,
        error: str | None,
        flags: tuple[str, ...],
        location: Location,
    ) -> None:
        self.id: Final = id
        self.path: Final = path
        self.resolved_path: Final = resolved_path
        self.role: Final = role
        self.load: Final = load
        self.section: Final = section
        self.section_found: Final = section_found
        #: Lines of the extracted section (heading and children), when one was found.
        self.section_lines: Final = section_lines
        self.requires: Final = requires
        self.status: Final = status  # ok | invalid_path | missing_file | missing_section
        self.error: Final = error
        self.flags: Final = flags  # leaves_package_root, crosses_symlink
        self.location: Final = location

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "resolved_path": self.resolved_path,
            "role": self.role,
            "load": self.load,
            "section": self.section,
            "section_found": self.section_found,
            "section_lines": self.section_lines,
            "requires": list(self.requires),
            "status": self.status,
            "error": self.error,
            "flags": list(self.flags),
        }


class ImportsReport(Record):
    """Every import checked, the dependency-first load order and any cycles."""

    __slots__ = ("cycles", "imports", "load_order", "spec")
    __match_args__ = ("spec", "imports", "load_order", "cycles")

    def __init__(
        self,
        spec: str,
        imports: tuple[ImportEntry, ...],
        load_order: tuple[str, ...],
        cycles: tuple[tuple[str, ...], ...],
    ) -> None:
        self.spec: Final = spec
        self.imports: Final = imports
        self.load_order: Final = load_order
        self.cycles: Final = cycles

    @property
    def ok(self) -> bool:
        return not self.cycles and all(e.ok for e in self.imports)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "spec": self.spec,
            "imports": [e.to_json() for e in self.imports],
            "load_order": list(self.load_order),
            "cycles": [list(c) for c in self.cycles],
        }


def path_problem(raw: str) -> str | None:
    """Why ``raw`` cannot be resolved lexically, or ``None`` when it can."""
    text = raw.strip()
    if not text:
        return "import path is empty"
    if "://" in text:
        return "import path must be local and relative (URLs are not loaded)"
    if text.startswith("~"):
        return "import path must not use `~` (home directories are not expanded)"
    if os.path.isabs(text) or text.startswith("\\"):
        return "import path must be local and relative (absolute paths are refused)"
    match = re.search(_SHELL, text)
    if match:
        what = "environment variables" if match.group() == "$" else "shell syntax"
        return f"import path must not use {what} ({match.group()!r} is not expanded)"
    return None


def resolve(spec_dir: Path, raw: str) -> Path:
    """``raw`` joined to the spec's directory and normalised without touching the disk."""
    return Path(os.path.normpath(spec_dir / raw))


def leaves_root(raw: str) -> bool:
    """Whether the path climbs above the spec's directory (the package root)."""
    norm = os.path.normpath(raw)
    return norm == ".." or norm.startswith(".." + os.sep)


def crosses_symlink(spec_dir: Path, raw: str) -> bool:
    """Whether any component of the lexical path (below the spec dir) is a symlink."""
    current = spec_dir
    for part in Path(raw).parts:
        current = Path(os.path.normpath(current / part))
        if part in ("..", "."):
            continue
        try:
            if current.is_symlink():
                return True
        except OSError:  # name too long and the like: no symlink here; the read says why
            return False
    return False


def _norm_heading(text: str) -> str:
    return text.strip().strip("#").strip().lower()


def has_section(text: str, section: str) -> bool:
    """The reference's rule: some line starting with ``#`` names the section (any case)."""
    want = _norm_heading(section)
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#") and _norm_heading(stripped.lstrip("#")) == want:
            return True
    return False


def extract_section(text: str, section: str, *, fences: bool = True) -> str | None:
    """The heading named ``section`` and its children; ``None`` when it is absent.

    The section ends at the next heading of the same or a higher level;
    ``#`` lines inside fenced code blocks are not headings (``fences=False``
    reads every ``#`` line as one, which is how the reference finds sections).
    """
    want = _norm_heading(section)
    fence, heading = re.compile(_FENCE), re.compile(_HEADING)
    lines = text.splitlines(keepends=True)
    in_fence = False
    start = level = -1
    for i, line in enumerate(lines):
        if fences and fence.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = heading.match(line.rstrip("\r\n"))
        if not match:
            continue
        this_level = len(match.group(1))
        if start < 0:
            if _norm_heading(match.group(2)) == want:
                start, level = i, this_level
        elif this_level <= level:
            return "".join(lines[start:i])
    if start >= 0:
        return "".join(lines[start:])
    return None


def import_graph(imports: dict[str, Any]) -> dict[str, list[str]]:
    """``id -> required import ids`` for well-formed entries."""
    graph: dict[str, list[str]] = {}
    for key, imp in imports.items():
        req = imp.get("requires") if isinstance(imp, dict) else None
        items = req.get("imports") if isinstance(req, dict) else None
        graph[key] = [x for x in items if isinstance(x, str)] if isinstance(items, list) else []
    return graph


def load_order(graph: dict[str, list[str]]) -> tuple[list[str], list[list[str]]]:
    """Dependency-first order (keys visited in sorted order) and every cycle met."""
    return depth_first(sorted(graph), lambda node: [c for c in graph[node] if c in graph])


def depth_first(
    roots: Iterable[str], children: Callable[[str], list[str]]
) -> tuple[list[str], list[list[str]]]:
    """Post-order of a depth-first walk from ``roots`` in turn, and each cycle the first time met.

    Iterative (an explicit stack), so a chain of thousands of imports is an
    order, not a RecursionError. A cycle is reported as the path from its
    first node back to itself.
    """
    order: list[str] = []
    cycles: list[list[str]] = []
    seen_cycles: set[frozenset[str]] = set()
    visiting: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()
    for root in roots:
        if root in done:
            continue
        visiting.append(root)
        on_path.add(root)
        stack: list[tuple[str, list[str], int]] = [(root, children(root), 0)]
        while stack:
            node, kids, i = stack[-1]
            if i == len(kids):
                stack.pop()
                visiting.pop()
                on_path.discard(node)
                done.add(node)
                order.append(node)
                continue
            stack[-1] = (node, kids, i + 1)
            child = kids[i]
            if child in done:
                continue
            if child in on_path:
                cycle = [*visiting[visiting.index(child) :], child]
                if frozenset(cycle) not in seen_cycles:
                    seen_cycles.add(frozenset(cycle))
                    cycles.append(cycle)
                continue
            visiting.append(child)
            on_path.add(child)
            stack.append((child, children(child), 0))
    return order, cycles


def _where(mapping: Any, key: str, fallback: Location) -> Location:
    return mapping.where_value(key) if isinstance(mapping, LocDict) else fallback


def check_imports(data: dict[str, Any], spec_path: str | Path) -> ImportsReport:
    """Resolve and read every import of a parsed spec; never raises for bad paths."""
    spec_path = Path(spec_path)
    spec_dir = spec_path.parent
    imports = data.get("imports")
    imports = imports if isinstance(imports, dict) else {}
    entries = []
    file = str(spec_path)
    for key in sorted(imports):
        imp = imports[key] if isinstance(imports[key], dict) else {}
        raw_path = imp.get("path")
        raw: str = raw_path if isinstance(raw_path, str) else ""
        section = imp.get("section") if isinstance(imp.get("section"), str) else None
        requires = import_graph({key: imp})[key]
        loc = _where(imp, "path", _where(imports, key, Location(file)))
        status, error, resolved, found = "ok", None, None, None
        lines: int | None = None
        flags: list[str] = []
        problem = path_problem(raw)
        if problem:
            status, error = "invalid_path", problem
        else:
            target = resolve(spec_dir, raw.strip())
            resolved = str(target)
            if leaves_root(raw.strip()):
                flags.append("leaves_package_root")
            if crosses_symlink(spec_dir, raw.strip()):
                flags.append("crosses_symlink")
            try:
                content = read_regular_file(target).decode("utf-8")
            except UnreadableFile as exc:
                # The reference names every read failure missing_file; the reason says which.
                status, error = "missing_file", exc.reason
            except UnicodeDecodeError:
                # The reference reads imports as UTF-8 text and fails the same way.
                status, error = "missing_file", "stream did not contain valid UTF-8"
            else:
                if section is not None:
                    found = has_section(content, section)
                    body = extract_section(content, section) or (
                        extract_section(content, section, fences=False) if found else None
                    )
                    lines = None if body is None else len(body.splitlines())
                    if not found:
                        status = "missing_section"
                        error = (
                            f"section {section!r} not found in {raw.strip()}; import fails closed"
                        )
        entries.append(
            ImportEntry(
                id=key,
                path=raw,
                resolved_path=resolved,
                role=str(imp.get("role", "")),
                load=str(imp.get("load", "on_demand")),
                section=section,
                section_found=found,
                section_lines=lines,
                requires=tuple(requires),
                status=status,
                error=error,
                flags=tuple(flags),
                location=loc,
            )
        )
    order, cycles = load_order(import_graph(imports))
    return ImportsReport(
        spec=file,
        imports=tuple(entries),
        load_order=tuple(order),
        cycles=tuple(tuple(c) for c in cycles),
    )


def import_diagnostics(report: ImportsReport) -> list[Diagnostic]:
    """File-check errors for failing imports, and warnings for flagged paths."""
    out: list[Diagnostic] = []
    for e in report.imports:
        path = f"imports.{e.id}.path"
        if not e.ok:
            out.append(
                Diagnostic(
                    f"{e.status} ({e.error})" if e.error else e.status,
                    e.location,
                    path=path,
                    code=f"import_{e.status}",
                )
            )
        for flag in e.flags:
            text = {
                "leaves_package_root": f"{e.path} leaves the package root (the spec's folder)",
                "crosses_symlink": f"{e.path} passes through a symlink",
            }[flag]
            out.append(Diagnostic(text, e.location, path=path, severity="warning", code=flag))
    return out
