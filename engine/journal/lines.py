"""Reading JSON-lines input without trusting its size.

A journal row is small (a few hundred bytes), so a line longer than
:data:`MAX_LINE_CHARS` is a mistake (``< /dev/zero``, a binary file, a
concatenated dump) and reading it whole would only end in a MemoryError.
Lines are therefore read one at a time with a length cap, and an import file
must be a regular file of at most :data:`MAX_IMPORT_BYTES` (a device or FIFO
can be endless; use ``-`` to import from stdin, which is read as a stream).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import TextIO

from engine.capped import CappedReadError, open_capped
from engine.errors import Diagnostic, InputError, Location

#: Longest accepted JSON line (characters, without the newline): 64 KiB.
MAX_LINE_CHARS = 65_536
#: Largest accepted import (file size, or characters read from stdin): 4 GiB.
MAX_IMPORT_BYTES = 4 * 1024**3


def _error(file: str, line: int, problem: str, field: str = "row", hint: str = "") -> InputError:
    loc = Location(file, line)
    text = f"{loc}: {problem}" + (f"; {hint}" if hint else "")
    return InputError(
        text,
        title="Input refused",
        diagnostics=[Diagnostic(problem, loc, path=field, code="row", hint=hint)],
    )


def open_import_file(path: str) -> TextIO:
    """An import file opened as UTF-8 text: a regular file of at most :data:`MAX_IMPORT_BYTES`.

    The file is streamed line by line, not read whole, so this opens it with
    :func:`engine.capped.open_capped` rather than reading it.
    """
    try:
        raw = open_capped(path, MAX_IMPORT_BYTES)
    except CappedReadError as exc:
        if exc.kind in ("directory", "not_regular"):
            raise _error(
                path, 0, "not a regular file (devices, FIFOs and directories can be endless)",
                field="", hint="use '-' to import from stdin",
            ) from None  # fmt: skip
        if exc.kind == "too_large" and exc.size is not None:
            raise _error(
                path,
                0,
                f"file is {exc.size:,} bytes, more than the {MAX_IMPORT_BYTES:,} limit",
                field="",
            ) from None
        raise _error(path, 0, f"cannot read: {exc.reason}", field="") from None
    return io.TextIOWrapper(raw, encoding="utf-8")


def iter_capped_lines(
    stream: TextIO,
    file: str,
    *,
    max_chars: int = MAX_LINE_CHARS,
    max_total: int | None = None,
    hint: str = "",
) -> Iterator[tuple[int, str]]:
    """(line number, line) pairs; a line over ``max_chars`` or bad UTF-8 is an InputError.

    At most ``max_chars + 1`` characters are ever held for one line, so an
    endless line costs 64 KiB of memory, not all of it.
    """
    lineno = total = 0
    while True:
        try:
            line = stream.readline(max_chars + 1)
        except UnicodeDecodeError as exc:
            raise _error(file, lineno + 1, f"not UTF-8 ({exc.reason})", hint=hint) from None
        if not line:
            return
        lineno += 1
        if len(line) > max_chars and not line.endswith("\n"):
            raise _error(
                file, lineno, f"line longer than {max_chars // 1024} KiB (a journal row is small)",
                hint=hint,
            )  # fmt: skip
        total += len(line)
        if max_total is not None and total > max_total:
            raise _error(file, lineno, f"input larger than {max_total:,} characters", hint=hint)
        yield lineno, line
