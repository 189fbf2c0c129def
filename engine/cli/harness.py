"""The ``harness`` command: journal, rules, holds, policy, doctor, console.

Each command group lives in its own ``engine.cli.cmd_*`` module exposing
``register(subparsers)``; those modules import only argparse-level code at top
level and defer heavy imports to their handlers, so ``harness journal tail``
starts fast and never loads Textual.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence

from engine.cli.common import ArgumentParser, dispatch

#: Command modules in help order. A module that is not there yet is skipped.
COMMAND_MODULES = (
    "console",
    "demo",
    "journal",
    "evaluate",
    "rules",
    "holds",
    "policy",
    "doctor",
    "metrics",
    "serve",
    "hook",
)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="harness",
        description="Operate a fleet of agent harnesses: journal, rules, holds and the console.",
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMAND_MODULES:
        modname = f"engine.cli.cmd_{name}"
        if importlib.util.find_spec(modname) is None:
            continue
        importlib.import_module(modname).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
