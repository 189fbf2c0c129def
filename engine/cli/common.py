"""Helpers shared by every CLI: error printing, JSON output, exit codes.

The pinned exit codes are 0 ok, 1 the check found failures (an invalid spec
or rule file included), 2 usage or unreadable input, 70 an internal error (a
bug). ``run_main`` is the single place where an error becomes a message and an
exit code, for ``harness`` and ``skillspec`` alike, so no command prints a
traceback for bad input and no bug passes silently.

Nothing here imports argparse, sqlite3, json or traceback at module level: the
command hook runs once per agent tool call and ``skillspec validate`` from a
pre-commit hook, and both reach ``run_main`` without needing any of them on
the way to a verdict. The parser class lives in :mod:`engine.cli.parser`.
"""

from __future__ import annotations

import os
import sys

from engine.errors import HarnessError, traceback_id

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any, TextIO

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: A bug reached the top of a command (BSD ``EX_SOFTWARE``), distinct from every input verdict.
EXIT_INTERNAL = 70
#: Set to 1 to print the traceback of an internal error.
TRACEBACK_ENV = "HARNESS_TRACEBACK"


def print_json(obj: Any, out: TextIO | None = None) -> None:
    from engine.jsontext import dumps

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
    except MemoryError:
        return _fail(args, "Input too large", "the input is too large to process")
    except Exception as exc:
        # sqlite3 is looked up, not imported: a command that never loaded it
        # cannot have raised one of its errors.
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError):
            # Commands map store problems themselves where they can say more; a fault
            # met mid-query (a corrupt page, a read-only file) still names the store.
            from engine.store.db import store_fault

            fault = store_fault(exc)
            return _fail(args, fault.title, fault.message)
        return internal_error(args, exc)  # the last resort: a bug, said as one, never silent


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
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    return EXIT_INTERNAL


def _fail(args: argparse.Namespace, title: str, message: str) -> int:
    if getattr(args, "json", False):
        print_json({"ok": False, "error": {"title": title, "message": message, "diagnostics": []}})
    sys.stderr.write(f"{title}: {message}\n")
    return EXIT_USAGE


def plain_namespace(**values: object) -> argparse.Namespace:
    """What ``parse_args`` would return, for a fast path that read plain arguments itself.

    A ``types.SimpleNamespace`` reads like an ``argparse.Namespace`` for every
    handler (attributes, ``getattr`` with a default, ``vars``) and spares a
    once-per-tool-call command the import of argparse and gettext.
    """
    from types import SimpleNamespace

    return SimpleNamespace(**values)  # type: ignore[return-value]
