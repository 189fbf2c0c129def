"""Helpers shared by every CLI: error printing, JSON output, exit codes.

The pinned exit codes are 0 ok, 1 the check found failures, 2 usage or
unreadable input. ``run_main`` is the single place where a ``HarnessError``
becomes a message and an exit code, so no command prints a traceback for bad
input.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from engine.errors import HarnessError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its default) but never 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def print_json(obj: Any, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    json.dump(obj, stream, indent=2, sort_keys=False, ensure_ascii=False, default=str)
    stream.write("\n")


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
    except sqlite3.OperationalError as exc:
        # The last line of defence: commands map store problems themselves where
        # they can say more; whatever slips through is still a message, not a traceback.
        text = str(exc)
        if "locked" in text or "busy" in text:
            return _fail(args, "Store busy", f"the store is locked by another writer ({text})")
        return _fail(args, "Bad store", f"cannot use the store: {text}")
    except sqlite3.DatabaseError as exc:
        return _fail(args, "Bad store", f"not a usable store: {exc}")
    except OverflowError as exc:
        return _fail(args, "Bad input", f"a number is out of range: {exc}")
    except MemoryError:
        return _fail(args, "Input too large", "the input is too large to process")


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
