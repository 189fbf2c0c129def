"""Helpers shared by every CLI: error printing, JSON output, exit codes.

The pinned exit codes are 0 ok, 1 the check found failures (an invalid spec
or rule file included), 2 usage or unreadable input, 70 an internal error (a
bug). ``run_main`` is the single place where an error becomes a message and an
exit code, for ``harness`` and ``skillspec`` alike, so no command prints a
traceback for bad input and no bug passes silently.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from engine.errors import HarnessError, traceback_id
from engine.jsontext import dumps

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: A bug reached the top of a command (BSD ``EX_SOFTWARE``), distinct from every input verdict.
EXIT_INTERNAL = 70
#: Set to 1 to print the traceback of an internal error.
TRACEBACK_ENV = "HARNESS_TRACEBACK"


class ArgumentParser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its default) but never 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def print_json(obj: Any, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    stream.write(dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def print_error(exc: HarnessError, source: str | None = None) -> None:
    err = sys.stderr
    err.write(f"{exc.title}: {exc.message}\n" if not exc.diagnostics else f"{exc.title}\n")
    for diag in exc.diagnostics:
        err.write(diag.render(source) + "\n")


def run_main(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand handler, turning user errors into messages and exit codes."""
    try:
        return handler(args)
    except HarnessError as exc:
        if getattr(args, "json", False):
            print_json(
                {
                    "ok": False,
                    "error": {
                        "title": exc.title,
                        "message": exc.message,
                        "diagnostics": [d.to_json() for d in exc.diagnostics],
                    },
                }
            )
        print_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except sqlite3.DatabaseError as exc:
        # Commands map store problems themselves where they can say more; a fault
        # met mid-query (a corrupt page, a read-only file) still names the store.
        from engine.store.db import store_fault

        fault = store_fault(exc)
        return _fail(args, fault.title, fault.message)
    except MemoryError:
        return _fail(args, "Input too large", "the input is too large to process")
    except Exception as exc:  # the last resort: a bug, said as one, never silent
        return internal_error(args, exc)


def internal_error(args: argparse.Namespace, exc: BaseException) -> int:
    """Report a bug: "internal error" with a short traceback id, exit :data:`EXIT_INTERNAL`.

    The traceback goes to stderr only when ``HARNESS_TRACEBACK=1`` (or the
    command's ``--verbose``) asks for it, so a user can paste the id and, when
    asked, the full trace.
    """
    tb_id = traceback_id(exc)
    message = (
        f"{type(exc).__name__} (id {tb_id}); this is a bug in harness-console, not your input's "
        f"fault. Rerun with {TRACEBACK_ENV}=1 to print the traceback."
    )
    if getattr(args, "json", False):
        print_json(
            {
                "ok": False,
                "error": {"title": "Internal error", "message": message, "id": tb_id},
            }
        )
    sys.stderr.write(f"internal error: {message}\n")
    if os.environ.get(TRACEBACK_ENV) == "1" or getattr(args, "verbose", False):
        traceback.print_exception(exc, file=sys.stderr)
    return EXIT_INTERNAL


def _fail(args: argparse.Namespace, title: str, message: str) -> int:
    if getattr(args, "json", False):
        print_json({"ok": False, "error": {"title": title, "message": message, "diagnostics": []}})
    sys.stderr.write(f"{title}: {message}\n")
    return EXIT_USAGE


def dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_main(handler, args)
