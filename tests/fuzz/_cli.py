"""Run a CLI in-process with given stdin; return (exit code, stdout, stderr)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Sequence

#: What a fuzzed CLI may exit with: ok, check failed, bad input. 70 is a bug.
ALLOWED_EXITS = (0, 1, 2)


def run_cli(
    main: Callable[[Sequence[str]], int], argv: Sequence[str], stdin: str | bytes = ""
) -> tuple[int, str, str]:
    """``main(argv)`` with ``stdin`` as standard input (bytes: readable as ``sys.stdin.buffer``,
    as ``harness hook`` reads it)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = (
        io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        if isinstance(stdin, bytes)
        else io.StringIO(stdin)
    )
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, out: str, err: str) -> None:
    """A located project error or success: a documented exit code, no traceback."""
    assert code in ALLOWED_EXITS, (code, err[-2000:])
    assert "Traceback" not in out + err and "internal error" not in err, err[-2000:]
    (out + err).encode("utf-8")  # everything printed is writable as UTF-8


def assert_refused(code: int, out: str, err: str, *, exit_code: int = 2) -> None:
    """A refusal said as one: ``exit_code``, a message, no traceback, no internal error.

    Standard error is written with ``backslashreplace`` by Python whatever the
    locale, so a refused path echoed there (a lone surrogate) is still
    writable; standard output must be plain UTF-8.
    """
    assert code == exit_code, (code, err[-2000:])
    assert (err + out).strip(), "a refusal says why (--json says it on stdout)"
    assert "Traceback" not in out + err and "internal error" not in err, err[-2000:]
    out.encode("utf-8")
    err.encode("utf-8", "backslashreplace")
