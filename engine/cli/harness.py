"""Build the ``harness`` program: its command modules in help order, on the shared registry.

Each command group lives in its own ``engine.cli.cmd_*`` module exposing
``register(subparsers)``; the program is those modules in help order, built
by the one registry (:mod:`engine.cli.registry`) that ``skillspec`` shares.
The modules import only argparse-level code at top level and defer heavy
imports to their handlers, so ``harness journal tail`` starts fast and never
loads Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

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
from engine.cli.common import ArgumentParser
from engine.cli.registry import Program
from engine.views.store_schema import register_full_schema

#: The ``harness`` program: command modules in help order.
PROGRAM = Program(
    prog="harness",
    description="Operate a fleet of agent harnesses: journal, rules, holds and the console.",
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


def build_parser() -> ArgumentParser:
    return PROGRAM.build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    # Every harness command may open the store for the whole program's schema.
    register_full_schema()
    return PROGRAM.main(argv)


if __name__ == "__main__":
    sys.exit(main())
