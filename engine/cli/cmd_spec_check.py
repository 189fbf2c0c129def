"""``skillspec validate``, ``skillspec imports check``, ``skillspec deps check``.

Exit codes follow the pinned convention: 0 the check passed, 1 the spec (or
its imports, or its dependencies) failed the check, 2 the file could not be
read or is not YAML at all. Text output shows each error with the offending
source line and a caret; ``--json`` prints one object for scripts.
"""

from __future__ import annotations

import sys

from engine.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

    from engine.skillspec.load import SpecReport


def spec_arguments(p: argparse.ArgumentParser) -> None:
    """``SPEC`` and ``--json``, which every ``skillspec`` command on a spec takes first."""
    p.add_argument("spec", metavar="SPEC", help="path to a skill.spec.yml")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _render(report: SpecReport, out: TextIO, errors_only: bool = False) -> None:
    for diag in report.diagnostics:
        if errors_only and diag.severity != "error":
            continue
        out.write(diag.render(report.text or None) + "\n")


def _unreadable(report: SpecReport, as_json: bool) -> int:
    """A file we could not read or parse: say where and exit 2."""
    if as_json:
        print_json({"ok": False, "spec": str(report.path), "unreadable": True, **_diags(report)})
    else:
        sys.stderr.write(f"skillspec: cannot load {report.path}\n")
        _render(report, sys.stderr)
    return EXIT_USAGE


def _diags(report: SpecReport) -> dict[str, Any]:
    return {
        "errors": [d.to_json() for d in report.errors],
        "warnings": [d.to_json() for d in report.warnings],
    }


def _summary(report: SpecReport) -> str:
    data: dict[str, Any] = report.data or {}
    counts = []
    for name in ("routes", "rules", "tests", "imports", "resources"):
        value = data.get(name)
        if isinstance(value, list | dict) and value:
            counts.append(f"{len(value)} {name}")
    return ", ".join(counts) or "no routes or rules"


def cmd_validate(args: argparse.Namespace) -> int:
    from engine.skillspec.load import check_spec

    report = check_spec(args.spec)
    if report.unreadable:
        return _unreadable(report, args.json)
    if args.json:
        print_json(report.to_json())
        return EXIT_OK if report.ok else EXIT_FAILED
    out = sys.stdout
    _render(report, out)
    if report.ok:
        out.write(f"ok: {report.path} ({report.data and report.data.get('id')}): ")
        out.write(_summary(report) + "\n")
        return EXIT_OK
    n = len(report.errors)
    what = "structure" if not report.structural_ok else "package files"
    out.write(f"invalid: {report.path}: {n} error{'s' if n != 1 else ''} ({what})\n")
    return EXIT_FAILED


def cmd_imports_check(args: argparse.Namespace) -> int:
    from engine.skillspec.imports import check_imports
    from engine.skillspec.load import check_spec

    report = check_spec(args.spec, resolve_files=False)
    if report.unreadable:
        return _unreadable(report, args.json)
    if report.data is None:
        return _spec_failed(report, args.json)
    imports = check_imports(report.data, report.path)
    ok = imports.ok and report.structural_ok
    if args.json:
        payload = imports.to_json()
        payload["ok"] = ok
        payload["spec_errors"] = [d.to_json() for d in report.errors]
        print_json(payload)
        return EXIT_OK if ok else EXIT_FAILED
    out = sys.stdout
    for entry in imports.imports:
        section = f" #{entry.section}" if entry.section else ""
        if entry.section_lines is not None:
            section += f" ({entry.section_lines} lines)"
        flags = f" [{', '.join(entry.flags)}]" if entry.flags else ""
        line = f"{entry.status:16} {entry.id}: {entry.path}{section}{flags}"
        if entry.error:
            line += f" ({entry.error})"
        out.write(line + "\n")
        if entry.resolved_path:
            out.write(f"{'':16}   -> {entry.resolved_path}\n")
    for cycle in imports.cycles:
        out.write(f"cycle: {' -> '.join(cycle)}\n")
    out.write(f"load order: {', '.join(imports.load_order) or '(no imports)'}\n")
    if not report.structural_ok:
        _render(report, out, errors_only=True)
    out.write(("ok" if ok else "failed") + f": {len(imports.imports)} imports\n")
    return EXIT_OK if ok else EXIT_FAILED


def _spec_failed(report: SpecReport, as_json: bool) -> int:
    if as_json:
        print_json({"ok": False, "spec": str(report.path), **_diags(report)})
    else:
        _render(report, sys.stdout)
        sys.stdout.write(f"invalid: {report.path}: fix the spec before this check\n")
    return EXIT_FAILED


def cmd_deps_check(args: argparse.Namespace) -> int:
    from engine.skillspec.deps import check_deps
    from engine.skillspec.load import check_spec

    report = check_spec(args.spec, resolve_files=False)
    if report.unreadable:
        return _unreadable(report, args.json)
    if report.data is None or not report.structural_ok:
        return _spec_failed(report, args.json)
    deps = check_deps(report.data, report.path)
    if args.json:
        print_json(deps.to_json())
        return EXIT_OK if deps.ok else EXIT_FAILED
    out = sys.stdout
    labels = {"present": "ok", "missing": "MISSING", "deferred": "needs a harness check"}
    for dep in deps.dependencies:
        extra = " (permission required)" if dep.permission_required else ""
        out.write(f"{labels[dep.status]:22} {dep.id} [{dep.kind}]: {dep.message}{extra}\n")
    missing = sum(d.status == "missing" for d in deps.dependencies)
    deferred = sum(d.status == "deferred" for d in deps.dependencies)
    out.write(
        f"{'ok' if deps.ok else 'failed'}: {len(deps.dependencies)} dependencies, "
        f"{missing} missing, {deferred} need a harness check\n"
    )
    return EXIT_OK if deps.ok else EXIT_FAILED
