"""Public API: load a ``skill.spec.yml`` and check it completely, never raising.

``check_spec`` is what every consumer calls (the ``skillspec`` CLI, decide and
test, the console): it reads the file, parses it strictly, checks structure
and cross-references and, unless told not to, the files the spec names. Bad
input becomes diagnostics in the report, not an exception, so a console can
show a broken spec next to working ones.

The two verdicts mirror the reference's two loaders: ``structural_ok`` is its
"unresolved" load (parse + structure + cross-references), ``ok`` its full load
(plus imports and package files).
"""

from __future__ import annotations

import errno
from pathlib import Path

from engine.errors import Diagnostic, HarnessError, InputError, InvalidSource, Location
from engine.record import Record
from engine.yamlsrc import MAX_BYTES, LocDict, decode_source, parse_yaml

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import Any, Final

    from engine.skillspec.decide import CompiledSpec


class SpecReport(Record):
    """Everything known about one spec file after checking it.

    A :class:`~engine.record.Record`, not a dataclass: ``skillspec validate``
    imports this module on every run and otherwise never loads ``dataclasses``.
    """

    __slots__ = ("data", "diagnostics", "files_ok", "path", "structural_ok", "text", "unreadable")
    __match_args__ = (
        "path",
        "data",
        "text",
        "diagnostics",
        "structural_ok",
        "files_ok",
        "unreadable",
    )

    def __init__(
        self,
        path: Path,
        data: LocDict | None,
        text: str,
        diagnostics: tuple[Diagnostic, ...],
        structural_ok: bool,
        files_ok: bool,
        unreadable: bool = False,
    ) -> None:
        self.path: Final = path
        self.data: Final = data
        self.text: Final = text
        self.diagnostics: Final = diagnostics
        self.structural_ok: Final = structural_ok
        self.files_ok: Final = files_ok
        #: True when the file could not be read at all (exit code 2); a file that was read
        #: but does not parse has ``data`` None and is an invalid spec (exit code 1).
        self.unreadable: Final = unreadable

    @property
    def ok(self) -> bool:
        return self.structural_ok and self.files_ok

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "spec": str(self.path),
            "structural_ok": self.structural_ok,
            "files_ok": self.files_ok,
            "id": self.data.get("id") if self.data is not None else None,
            "errors": [d.to_json() for d in self.errors],
            "warnings": [d.to_json() for d in self.warnings],
        }


def _order(diags: list[Diagnostic]) -> tuple[Diagnostic, ...]:
    """File order: by line and column; located findings before unlocated ones."""
    return tuple(sorted(diags, key=lambda d: (d.location.line or 1 << 30, d.location.col, d.path)))


def read_spec_text(path: str | Path) -> str:
    """The spec's text; :class:`InputError` (with a location) when unreadable."""
    from engine.skillspec.files import UnreadableFile, read_regular_file

    name = str(path)
    try:
        raw = read_regular_file(path, MAX_BYTES)
    except UnreadableFile as exc:
        reason = exc.reason
        raise InputError(
            f"{name}: cannot read: {reason}",
            title="Unreadable file",
            diagnostics=[Diagnostic(f"cannot read: {reason}", Location(name), code="io")],
        ) from None
    return decode_source(raw, name)


def check_spec(path: str | Path, *, resolve_files: bool = True) -> SpecReport:
    """Load and check one spec. Never raises for bad input: problems are diagnostics."""
    spec_path = Path(path)
    name = str(path)
    text = ""
    try:
        text = read_spec_text(spec_path)
        doc = parse_yaml(text, name)
    except InputError as exc:
        # Read but not parseable (InvalidSource) is an invalid spec, exit 1, as in the
        # reference; only a file that cannot be read at all is "unreadable" (exit 2).
        diags = exc.diagnostics or (Diagnostic(exc.message, Location(name)),)
        unreadable = not isinstance(exc, InvalidSource)
        return SpecReport(spec_path, None, text, tuple(diags), False, False, unreadable=unreadable)

    from engine.skillspec.structure import check_structure

    errors = check_structure(doc.data, text, name, doc.depth)
    warnings: list[Diagnostic] = []
    data = doc.data if isinstance(doc.data, LocDict) else None
    if data is None:
        return SpecReport(spec_path, None, text, _order(errors), False, False)

    from engine.skillspec.validate import validate_refs

    ref_errors, ref_warnings = validate_refs(data, name)
    errors += ref_errors
    warnings += ref_warnings
    structural_ok = not errors

    file_errors: list[Diagnostic] = []
    if resolve_files:
        from engine.skillspec.files import check_sidecars
        from engine.skillspec.imports import check_imports, import_diagnostics

        for diag in import_diagnostics(check_imports(data, spec_path)):
            (file_errors if diag.severity == "error" else warnings).append(diag)
        file_errors += check_sidecars(data, spec_path)
    return SpecReport(
        path=spec_path,
        data=data,
        text=text,
        diagnostics=_order(errors + file_errors + warnings),
        structural_ok=structural_ok,
        files_ok=not file_errors,
    )


def spec_fingerprint(path: str | Path) -> str:
    """``sha256:<hex>`` over the spec's bytes then each imported file's bytes, in load order.

    Imports that cannot be read (or whose path is refused, or that are not
    regular files, or exceed ``MAX_BYTES``) contribute nothing; the spec's own
    bytes still change when such a path is edited. Raises ``OSError`` only when
    the spec itself cannot be read (callers check first).
    """
    import hashlib

    from engine.skillspec.files import UnreadableFile, read_regular_file

    spec_path = Path(path)
    try:
        raw = read_regular_file(spec_path, MAX_BYTES)
    except UnreadableFile as exc:
        raise OSError(errno.EINVAL, exc.reason, str(spec_path)) from None
    digest = hashlib.sha256(raw)
    try:
        doc = parse_yaml(decode_source(raw, str(path)), str(path))
    except (InputError, RecursionError):
        return f"sha256:{digest.hexdigest()}"
    if not isinstance(doc.data, dict):
        return f"sha256:{digest.hexdigest()}"
    from engine.skillspec.imports import check_imports

    report = check_imports(doc.data, spec_path)
    by_id = {e.id: e for e in report.imports}
    for import_id in report.load_order:
        entry = by_id.get(import_id)
        if entry is None or entry.status == "invalid_path" or entry.resolved_path is None:
            continue
        try:
            digest.update(read_regular_file(entry.resolved_path, MAX_BYTES))
        except UnreadableFile:
            continue
    return f"sha256:{digest.hexdigest()}"


class DecidableSpec(Record):
    """One spec loaded for deciding: compiled when it validates, else only its located errors.

    Why one loader: the CLI refused an invalid spec while the console compiled
    it anyway and decided route=nowhere. Both now load through
    :func:`load_decidable`, so a spec either decides in both or in neither.
    """

    __slots__ = ("compiled", "report")
    __match_args__ = ("report", "compiled")

    def __init__(self, report: SpecReport, compiled: CompiledSpec | None) -> None:
        self.report: Final = report
        self.compiled: Final = compiled

    @property
    def ok(self) -> bool:
        return self.compiled is not None


def load_decidable(path: str | Path) -> DecidableSpec:
    """Check ``path`` fully (file checks included); compile it only if it validates."""
    from engine.skillspec.decide import compile_spec

    report = check_spec(path)
    if not report.ok or report.data is None:
        return DecidableSpec(report, None)
    return DecidableSpec(report, compile_spec(report.data))


class SpecRefused(HarnessError):
    """Why a spec cannot be decided on: the one refusal of :func:`spec_for_deciding`.

    The command line and the console refused the same file differently (an
    input error in one, a failed check in the other, with other words). Now
    both say this: "Spec not found" or "Cannot read spec" (exit 2) for a file
    that is missing or unreadable, "Spec does not validate" (exit 1, as the
    reference) with every located error for one that does not validate.
    """


#: How many located errors a refusal's message lists (all of them are its diagnostics).
SHOWN_ERRORS = 5


def spec_for_deciding(path: str | Path) -> DecidableSpec:
    """``path`` checked and compiled for deciding, or :class:`SpecRefused` saying why not."""
    target = Path(path)
    if not target.is_file():
        what = "a directory, not a spec file" if target.is_dir() else "no such file"
        raise SpecRefused(
            f"{path}: {what}",
            title="Spec not found",
            diagnostics=[Diagnostic(what, Location(str(path)))],
        )
    loaded = load_decidable(target)
    report = loaded.report
    if report.unreadable:
        raise SpecRefused(
            f"{path}: cannot be read", title="Cannot read spec", diagnostics=report.diagnostics
        )
    if loaded.compiled is None:
        errors = report.errors or report.diagnostics
        shown = "\n".join(str(d) for d in errors[:SHOWN_ERRORS])
        more = f"\n... and {len(errors) - SHOWN_ERRORS} more" if len(errors) > SHOWN_ERRORS else ""
        refused = SpecRefused(
            f"{path} does not validate; fix it before deciding or testing (file checks must"
            f" pass too, as in the reference)\n{shown}{more}",
            title="Spec does not validate",
            diagnostics=report.diagnostics,
        )
        refused.exit_code = 1
        raise refused
    return loaded
