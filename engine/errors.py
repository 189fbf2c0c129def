"""One error vocabulary for every engine surface.

Every problem a user can cause (a bad YAML file, a CEL typo, a malformed
journal row, a wrong CLI flag) is reported as a :class:`Diagnostic` with a
location, and raised, when it must stop the work, as a :class:`HarnessError`.
The CLIs catch ``HarnessError`` at the top and print it; anything else reaching
the top is a bug. Keeping location and rendering here means the skill checker,
the rule loader and the console all print errors the same way.
"""

from __future__ import annotations

from engine.record import Record

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Final, Literal

    Severity = Literal["error", "warning", "info"]


class Location(Record):
    """A point in a source file. ``line`` and ``col`` are 1-based; 0 means unknown.

    A :class:`~engine.record.Record` rather than a frozen dataclass, as is
    :class:`Diagnostic`: every command imports this module first.
    """

    __slots__ = ("col", "file", "line")
    __match_args__ = ("file", "line", "col")

    def __init__(self, file: str | None = None, line: int = 0, col: int = 0) -> None:
        self.file: Final = file
        self.line: Final = line
        self.col: Final = col

    def __str__(self) -> str:
        parts = [self.file or "<input>"]
        if self.line:
            parts.append(str(self.line))
            if self.col:
                parts.append(str(self.col))
        return ":".join(parts)


class Diagnostic(Record):
    """One finding: what is wrong, where, and (optionally) which field.

    ``path`` is the dotted field path inside the document (``rules[0].prefer``),
    which is what a user searches for when the line number has drifted.
    """

    __slots__ = ("code", "hint", "location", "message", "path", "severity")
    __match_args__ = ("message", "location", "path", "severity", "code", "hint")

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        path: str = "",
        severity: Severity = "error",
        code: str = "",
        hint: str = "",
    ) -> None:
        self.message: Final = message
        self.location: Final = location if location is not None else _NOWHERE
        self.path: Final = path
        self.severity: Final[Severity] = severity
        self.code: Final = code
        self.hint: Final = hint

    def with_hint(self, hint: str) -> Diagnostic:
        """This finding with ``hint`` in place of its own."""
        return Diagnostic(self.message, self.location, self.path, self.severity, self.code, hint)

    def __str__(self) -> str:
        where = str(self.location)
        field_part = f" {self.path}:" if self.path else ""
        text = f"{where}: {self.severity}:{field_part} {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "file": self.location.file,
            "line": self.location.line,
            "col": self.location.col,
            "hint": self.hint,
        }

    def render(self, source: str | None = None) -> str:
        """The diagnostic, plus the offending source line and a caret when known."""
        text = str(self)
        if source is None or not self.location.line:
            return text
        snippet = caret_snippet(source, self.location.line, self.location.col)
        return f"{text}\n{snippet}" if snippet else text


#: The location of a finding that has none (shared: a Location never changes).
_NOWHERE = Location()


def caret_snippet(source: str, line: int, col: int) -> str:
    """``source``'s 1-based ``line`` followed by a caret under ``col``."""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].expandtabs(1)
    if len(text) > 200:
        start = max(0, col - 100)
        text = text[start : start + 200]
        col -= start
    pad = " " * max(col - 1, 0)
    return f"  | {text}\n  | {pad}^"


class HarnessError(Exception):
    """Base class for errors a user can cause and fix.

    ``title`` is a short headline (shown as a console notification title or
    the first line of CLI output); ``diagnostics`` carries the located details.
    ``exit_code`` follows the pinned convention: 2 for usage or unreadable
    input, 1 for a check that found failures.
    """

    title: str = "Error"
    exit_code: int = 2

    def __init__(
        self,
        message: str,
        *,
        title: str | None = None,
        diagnostics: Iterable[Diagnostic] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)

    def __str__(self) -> str:
        if not self.diagnostics:
            return self.message
        return "\n".join(str(d) for d in self.diagnostics)


class InputError(HarnessError):
    """Unreadable or malformed input: a file, a flag, a row. Exit code 2."""

    title = "Bad input"
    exit_code = 2


class CheckFailed(HarnessError):
    """A check ran and found failures (invalid spec, failing test). Exit code 1."""

    title = "Check failed"
    exit_code = 1


class InvalidSource(InputError):
    """A file that was read but does not parse (bad YAML, a bad scalar, a byte order mark).

    Exit code 1, like the reference checker: the file is an invalid spec or
    rule file, which is a finding. Exit code 2 stays for a file that cannot be
    read at all (missing, permission, not a regular file, over the size cap).
    A subclass of :class:`InputError` so every ``except InputError`` around a
    parse keeps working.
    """

    title = "Invalid YAML"
    exit_code = 1


def traceback_id(exc: BaseException) -> str:
    """A short, stable id for an unexpected exception: 8 hex of a digest of its traceback.

    Only the exception type and the code positions (file, line, function) are
    hashed, never the message, so the same bug gives the same id on every
    input and the id can be logged without carrying user text.
    """
    import hashlib
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    parts = [type(exc).__qualname__]
    parts.extend(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}" for f in frames)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]
