"""``harness rules lint``: the evaluator's own loader, without a store.

Lint must never pass a rule the daemon would then disable (seed 004, "Lint
shares the loader"), so this module only *formats* what
:func:`engine.rules.language.loader.load_rules` finds: text with carets for people,
JSON for scripts, SARIF 2.1.0 for code-scanning UIs on the policy repo. A
hold or stop rule gets a warning — never a grant — because only the
operator's harness.toml can enforce it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.capped import CappedReadError, read_capped
from engine.config import HarnessConfig
from engine.errors import Diagnostic, Location
from engine.rules.language.loader import RULE_SUFFIXES, load_rules
from engine.rules.language.model import LoadResult, SourceKind
from engine.rules.language.sources import policy_dir_problems, rule_sources
from engine.yamlsrc import MAX_BYTES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FORMATS = ("text", "json", "sarif")


@dataclass(frozen=True, slots=True)
class LintReport:
    """What lint found; ``exit_code`` is 1 when any error was found."""

    result: LoadResult
    sources: tuple[tuple[Path, SourceKind], ...]

    @property
    def exit_code(self) -> int:
        return 1 if self.result.errors else 0


def named_file_problem(path: Path, name: str) -> Diagnostic | None:
    """Why a PATH named on the command line cannot be read at all, or None.

    Reads at most MAX_BYTES of a regular file only (a FIFO or a device would
    block or never end). A file that reads but does not decode or parse is
    left to the loader, which locates the problem like any other rule error.
    """
    try:
        read_capped(path, MAX_BYTES)
    except CappedReadError as exc:
        if exc.kind == "directory":
            return None
        if exc.kind == "not_regular":
            return _unreadable(name, "not a regular file (FIFO, device or socket)")
        if exc.kind == "too_large":
            return _unreadable(name, f"file is larger than {MAX_BYTES} bytes")
        if exc.kind == "unreadable":
            return _unreadable(name, f"cannot read: {exc.reason}")
        return _unreadable(name, exc.reason)
    return None


def _unreadable(name: str, reason: str) -> Diagnostic:
    return Diagnostic(f"cannot lint: {reason}", Location(name), code="io")


def lint_sources(
    paths: Sequence[str], config: HarnessConfig
) -> tuple[tuple[tuple[Path, SourceKind], ...], tuple[Diagnostic, ...]]:
    """Explicit PATHs as given (file or directory), else what the evaluator loads.

    The second item holds one located error per PATH that cannot be read at
    all: lint reports it as a result beside the others and lints the rest, so
    a policy repo's CI still gets its SARIF (issue 13).
    """
    if paths:
        out: list[tuple[Path, SourceKind]] = []
        problems: list[Diagnostic] = []
        for p in paths:
            path = Path(p).expanduser()
            problem = named_file_problem(path, p)
            if problem is not None:
                problems.append(problem)
            else:
                out.append((path, "file"))
        return tuple(out), tuple(problems)
    return rule_sources(config).dirs, ()


def run_lint(paths: Sequence[str], config: HarnessConfig) -> LintReport:
    sources, unreadable = lint_sources(paths, config)
    result = load_rules(sources, config.rules)
    if unreadable:
        result = replace(result, errors=(*unreadable, *result.errors))
    extra = [] if paths else policy_dir_problems(config)
    for path, _kind in sources:
        if path.is_dir() and not any(
            p.suffix in RULE_SUFFIXES and p.is_file() for p in path.iterdir()
        ):
            extra.append(
                Diagnostic(
                    f"no rule files in {path}",
                    Location(str(path)),
                    severity="warning",
                    code="empty",
                )
            )
    if extra:
        result = replace(result, warnings=(*result.warnings, *extra))
    return LintReport(result, sources)


def _source_text(file: str | None, cache: dict[str, str | None]) -> str | None:
    if not file:
        return None
    if file not in cache:
        try:  # never open a FIFO or device: it could block forever
            path = Path(file)
            cache[file] = (
                path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
            )
        except OSError:
            cache[file] = None
    return cache[file]


def format_text(report: LintReport) -> str:
    cache: dict[str, str | None] = {}
    lines = []
    for d in (*report.result.errors, *report.result.warnings):
        source = _source_text(d.location.file, cache) if d.location.line else None
        lines.append(d.render(source))
    res = report.result
    lines.append(
        f"{len(res.rules)} rule(s) loaded, {len(res.errors)} error(s), "
        f"{len(res.warnings)} warning(s)"
    )
    return "\n".join(lines)


def format_json(report: LintReport) -> dict[str, Any]:
    res = report.result
    return {
        "ok": not res.errors,
        "sources": [{"path": str(p), "kind": k} for p, k in report.sources],
        "rules": [
            {
                "name": cr.rule.name,
                "file": cr.rule.source_file,
                "on": cr.rule.on,
                "level": cr.rule.level,
                "hash": cr.rule.hash,
                "static_cost": cr.rule.static_cost,
            }
            for cr in res.rules
        ],
        "errors": [d.to_json() for d in res.errors],
        "warnings": [d.to_json() for d in res.warnings],
    }


def _sarif_result(d: Diagnostic) -> dict[str, Any]:
    region: dict[str, int] = {}
    if d.location.line:
        region["startLine"] = d.location.line
        if d.location.col:
            region["startColumn"] = d.location.col
    physical: dict[str, Any] = {"artifactLocation": {"uri": Path(d.location.file or "").as_posix()}}
    if region:
        physical["region"] = region
    text = f"{d.path}: {d.message}" if d.path else d.message
    if d.hint:
        text += f" ({d.hint})"
    return {
        "ruleId": d.code or "rule",
        "level": "error" if d.severity == "error" else "warning",
        "message": {"text": text},
        "locations": [{"physicalLocation": physical}],
    }


def format_sarif(report: LintReport) -> dict[str, Any]:
    diags = (*report.result.errors, *report.result.warnings)
    codes = sorted({d.code or "rule" for d in diags})
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "harness rules lint",
                        "rules": [{"id": c, "shortDescription": {"text": c}} for c in codes],
                    }
                },
                "results": [_sarif_result(d) for d in diags],
            }
        ],
    }
