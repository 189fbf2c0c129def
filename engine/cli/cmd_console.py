"""``harness console``: open the Textual operator console.

Textual is imported inside the handler (``importlib``), never at module level,
so ``harness --help`` and every other subcommand start without it.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "console",
        help="Open the operator console (fleet, fires, rules, holds, decide, explain, backtest).",
        description="Open the operator console on a store.",
    )
    p.add_argument("--store", metavar="PATH", help="journal store (default: from harness.toml)")
    p.add_argument(
        "--demo",
        action="store_true",
        help="run a simulated fleet into a temporary store with the starter pack",
    )
    p.add_argument(
        "--spec",
        metavar="GLOB",
        action="append",
        default=[],
        help="skill spec file or glob for the Decide pane (repeatable)",
    )
    p.add_argument("--policy", metavar="DIR", help="a directory of policy rule files to load")
    p.set_defaults(handler=cmd_console)


def cmd_console(args: argparse.Namespace) -> int:
    """Resolve the options (errors surface before the screen opens), then run the app."""
    from engine.views.session import ConsoleOptions

    options = ConsoleOptions.from_args(
        store=args.store, demo=args.demo, specs=tuple(args.spec), policy=args.policy
    )
    if not options.demo and not options.store_path.exists():
        # a typo must not quietly become a new, empty store the operator then stares at
        from engine.errors import Diagnostic, InputError, Location

        msg = (
            "no such store; create one with `harness journal import FILE --store PATH` or "
            "`harness demo --store PATH`, or try `harness console --demo`"
        )
        raise InputError(
            f"{options.store_path}: {msg}",
            title="Store not found",
            diagnostics=[Diagnostic(msg, Location(str(options.store_path)), path="--store")],
        )
    app_module = importlib.import_module("console.app")
    result: int = app_module.run_console(options)
    return result
