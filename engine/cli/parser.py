"""The argparse side of both programs: the parser class, ``--version``, and dispatch.

Why its own module: the command table (:mod:`engine.cli.registry`) says which
commands exist; this says how a command line is read. Every command's paths
pass through :class:`ArgumentParser`, every usage error is exit 2 with
argparse's own text, and :func:`dispatch` hands the parsed arguments to
:func:`engine.cli.common.run_main`, the one place an error becomes an exit
code. The fast paths (``harness hook``, ``skillspec validate``) never load it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from engine.capped import path_refusal
from engine.cli.common import EXIT_USAGE, run_main

DISTRIBUTION = "harness-console"

#: Metavars of the arguments that name a file or a directory, in every command.
PATH_METAVARS = frozenset({"PATH", "FILE", "DIR", "SPEC", "RUN_DIR", "RULE_FILE_OR_NAME"})


class ArgumentParser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line error (its default) but never 1.

    It also refuses, as a usage error naming the argument, a path argument
    the OS would refuse (a NUL byte, a lone surrogate, an over-long name):
    ``Path.exists()`` and ``sqlite3.connect`` raise on those instead of
    answering, and this is the one place every command's paths pass through.
    """

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if action.metavar in PATH_METAVARS:
            for text in arg_strings:
                problem = path_refusal(text)
                if problem is not None:
                    raise argparse.ArgumentError(action, problem)
        return super()._get_values(action, arg_strings)


def dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_main(handler, args)


def package_version() -> str:
    """The installed distribution's version; the source tree's when it is not installed."""
    # Imported here: importlib.metadata costs more start-up than the rest of the
    # parser, and only ``--version`` needs it (``harness hook`` runs per tool call).
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        import engine

        return str(getattr(engine, "__version__", "unknown"))


class VersionAction(argparse.Action):
    """``--version``, looking the version up only when asked (argparse's own action needs it
    while the parser is built)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("nargs", 0)
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        sys.stdout.write(f"{parser.prog} {package_version()}\n")
        parser.exit()


def group_help(
    group: argparse.ArgumentParser, code: int = EXIT_USAGE
) -> Callable[[argparse.Namespace], int]:
    """A command group run without its subcommand prints its own help on stderr, exit ``code``."""

    def handler(_args: argparse.Namespace) -> int:
        group.print_help(sys.stderr)
        return code

    return handler
