"""``harness console``: open the Textual operator console through its plugin entry point.

The console is the one part of this distribution above the CLI, so the CLI
never imports it. The console declares its entry function as an entry point
in ``pyproject.toml``, group ``harness_console.plugins``, name ``console``
(value ``console.app:run_console``); :func:`console_entry` finds it with
``importlib.metadata.entry_points`` and loads it only when the console opens.
This is the documented plugin point: another front end can register itself
under the same group and name. When the distribution's installed metadata
predates the entry point (a source checkout run without reinstalling), the
same declared value is used, still loaded through ``EntryPoint.load``.
Textual is therefore imported only by that load, never by ``harness --help``
or any other subcommand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib import metadata

    from engine.views.session import ConsoleOptions

#: Where the console registers its entry function (see ``pyproject.toml``).
PLUGIN_GROUP = "harness_console.plugins"
CONSOLE_ENTRY = "console"
#: The value the console declares; used when the installed metadata lacks it.
DEFAULT_CONSOLE_VALUE = "console.app:run_console"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help="journal store (default: from harness.toml)")
    p.add_argument(
        "--demo",
        action="store_true",
        help="run a simulated fleet into a temporary store with the starter pack (implies --act)",
    )
    p.add_argument(
        "--act",
        action="store_true",
        help="act on the store when nobody else does: take the evaluator lease, store fires, "
        "create holds and stops, run actions (without it the console only watches; "
        "harness serve or harness evaluate --follow acts)",
    )
    p.add_argument(
        "--spec",
        metavar="GLOB",
        action="append",
        default=[],
        help="skill spec file or glob for the Decide pane (repeatable)",
    )
    p.add_argument("--policy", metavar="DIR", help="a directory of policy rule files to load")


def console_entry() -> metadata.EntryPoint:
    """The registered ``harness_console.plugins``/``console`` entry point, else the default."""
    from importlib import metadata  # only when the console opens: it is slow to import

    found = metadata.entry_points(group=PLUGIN_GROUP, name=CONSOLE_ENTRY)
    for entry in found:
        return entry
    return metadata.EntryPoint(name=CONSOLE_ENTRY, value=DEFAULT_CONSOLE_VALUE, group=PLUGIN_GROUP)


def cmd_console(args: argparse.Namespace) -> int:
    """Resolve the options (errors surface before the screen opens), then run the console."""
    from engine.views.session import ConsoleOptions

    options = ConsoleOptions.from_args(
        store=args.store, demo=args.demo, specs=tuple(args.spec), policy=args.policy, act=args.act
    )
    if not options.demo:
        _check_store(options)
    run = cast(Callable[[ConsoleOptions], int], console_entry().load())
    return int(run(options))


def _check_store(options: ConsoleOptions) -> None:
    """Refuse a store the console could not open, before the screen opens (exit 2).

    A missing path, a directory or a file that is not a store is said once,
    as for every other command, instead of a screen that stacks an error
    notification every refresh.
    """
    from engine.store.db import connect

    if not options.store_path.exists():
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
    connect(options.store_path, create=False).close()
