"""Run a CLI in-process with given stdin; return (exit code, stdout, stderr)."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Sequence

#: What a fuzzed CLI may exit with: ok, check failed, bad input. 70 is a bug.
ALLOWED_EXITS = (0, 1, 2)


def run_cli(
    main: Callable[[Sequence[str]], int], argv: Sequence[str], stdin: str = ""
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
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
