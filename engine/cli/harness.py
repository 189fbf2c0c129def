"""The ``harness`` program: its ``hook`` fast path, then the command table's parser.

The commands, their handlers and their arguments are entries of the command
table in :mod:`engine.cli.registry` (``HARNESS_COMMANDS``), which
``skillspec`` shares. Command modules import only argparse-level code at top
level and defer heavy imports to their handlers, so ``harness journal tail``
starts fast and never loads Textual. ``harness hook AGENT`` runs once per
agent tool call: with plain arguments it skips argparse and the registry
altogether, and otherwise parses with the ``hook`` entry alone.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.cli.parser import ArgumentParser
    from engine.cli.registry import Program


def program() -> Program:
    """The ``harness`` program of the command table."""
    from engine.cli.registry import HARNESS

    return HARNESS


def __getattr__(name: str) -> Program:
    """``PROGRAM``, imported on first use (the hook's fast path never loads the registry)."""
    if name == "PROGRAM":
        return program()
    raise AttributeError(name)


def build_parser() -> ArgumentParser:
    return program().build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    from engine.views.store_schema import register_full_schema

    args = list(sys.argv[1:] if argv is None else argv)
    # Every harness command may open the store for the whole program's schema.
    register_full_schema()
    if args[:1] == ["hook"]:
        # A command hook runs once per tool call of an agent: plain arguments are
        # read without argparse, anything else by its own parser alone, so it
        # never imports the other commands' modules.
        from engine.cli import cmd_hook

        quick = cmd_hook.plain_args(args[1:])
        if quick is not None:
            from engine.cli.common import run_main

            return run_main(cmd_hook.cmd_hook, quick)
        try:
            return program().only("hook").main(args)
        except SystemExit as exc:
            # Exit 2 makes Claude Code and Codex block every tool call: a hook's
            # usage error must be a non-blocking 1 (argparse has printed why).
            code = exc.code if isinstance(exc.code, int) else 1
            return 1 if code == 2 else code
    return program().main(args)


if __name__ == "__main__":
    sys.exit(main())
