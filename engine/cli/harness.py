"""Build the ``harness`` program: its command modules in help order, on the shared registry.

Each command group lives in its own ``engine.cli.cmd_*`` module exposing
``register(subparsers)``; the program is those modules in help order, built
by the one registry (:mod:`engine.cli.registry`) that ``skillspec`` shares.
The modules import only argparse-level code at top level and defer heavy
imports to their handlers, so ``harness journal tail`` starts fast and never
loads Textual. ``harness hook AGENT`` runs once per agent tool call:
with plain arguments it skips argparse and the registry altogether.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.cli.registry import ArgumentParser, Program

DESCRIPTION = "Operate a fleet of agent harnesses: journal, rules, holds and the console."


@cache
def program() -> Program:
    """The ``harness`` program: command modules in help order."""
    from engine.cli import (
        cmd_console,
        cmd_demo,
        cmd_doctor,
        cmd_evaluate,
        cmd_holds,
        cmd_hook,
        cmd_journal,
        cmd_metrics,
        cmd_policy,
        cmd_rules,
        cmd_serve,
    )
    from engine.cli.registry import Program

    return Program(
        prog="harness",
        description=DESCRIPTION,
        commands=(
            cmd_console.register,
            cmd_demo.register,
            cmd_journal.register,
            cmd_evaluate.register,
            cmd_rules.register,
            cmd_holds.register,
            cmd_policy.register,
            cmd_doctor.register,
            cmd_metrics.register,
            cmd_serve.register,
            cmd_hook.register,
        ),
    )


def __getattr__(name: str) -> Program:
    """``PROGRAM``, built on first use (module-level names stay cheap to import)."""
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
        from engine.cli.registry import Program

        try:
            return Program("harness", DESCRIPTION, (cmd_hook.register,)).main(args)
        except SystemExit as exc:
            # Exit 2 makes Claude Code and Codex block every tool call: a hook's
            # usage error must be a non-blocking 1 (argparse has printed why).
            code = exc.code if isinstance(exc.code, int) else 1
            return 1 if code == 2 else code
    return program().main(args)


if __name__ == "__main__":
    sys.exit(main())
