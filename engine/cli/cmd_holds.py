"""``harness holds``: list rule holds, release one, and tell a supervisor whether a harness may run.

Usage: ``harness holds list | release HOLD_ID [--reason TEXT] | check HARNESS``.

``check`` is what a supervisor calls before admitting a run: exit 0 when the
harness is free, 3 when a rule hold refuses it (skip reason ``rule_hold``),
with the reason on stdout. Exit 3 is distinct from 1 (a failed check) and 2
(bad input) so a supervisor can never mistake "held" for "broken".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.journal.rows import IDENT_RE

EXIT_HELD = 3
MAX_ID = 2**63 - 1
# The journal's identifier shape: a harness id outside it can never match a hold,
# so "free" for it would be a lie a supervisor gate would act on.
HARNESS_ID_RE = IDENT_RE


def hold_id(text: str) -> int:
    """argparse type: a hold id is a positive SQLite integer (1..2**63-1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
    if not 1 <= value <= MAX_ID:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_ID}, got {text[:40]}")
    return value


def harness_id(text: str) -> str:
    """argparse type: a harness id in the journal's identifier shape."""
    if not HARNESS_ID_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text[:60]!r} is not a harness id (1-256 of A-Z a-z 0-9 . _ : / @ + -)"
        )
    return text


def list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--all", action="store_true", help="include released holds")
    p.add_argument("--json", action="store_true")


def release_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("hold_id", metavar="HOLD_ID", type=hold_id)
    p.add_argument("--reason", metavar="TEXT", default="")
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true")


def check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("harness", metavar="HARNESS", type=harness_id)
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true")


def _existing_store(args: argparse.Namespace) -> Path:
    """The store to read; InputError (exit 2) naming the path when there is none.

    A missing store must never read as "no holds" or "free": a supervisor
    gating on ``holds check`` would then let a harness through on a typo in
    ``--store`` or on a machine whose serve writes elsewhere. The store is
    never created here.
    """
    from engine.config import load_config, resolve_store
    from engine.errors import InputError

    config = load_config()
    path = resolve_store(args.store, config)
    if path.is_file() and path.stat().st_size > 0:
        return path
    how = "--store" if args.store else "[store] path" if config.store_path else "default store"
    state = "empty file" if path.is_file() else "missing" if not path.exists() else "not a file"
    raise InputError(
        f"{path}: no store here ({how}: {state}); name the store serve writes with --store PATH",
        title="No store",
    )


def cmd_list(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.rules.authority.holds import list_holds
    from engine.store.db import connect
    from engine.timefmt import iso_ms

    path = _existing_store(args)
    holds = list_holds(connect(path), include_released=args.all)
    if args.json:
        print_json({"ok": True, "store": str(path), "holds": [h.to_json() for h in holds]})
        return 0
    if not holds:
        print("no active holds" if not args.all else "no holds")
        return 0
    for h in holds:
        state = "active" if h.active else f"released by {h.released_by}: {h.release_reason}"
        print(
            f"{h.id:>5}  {h.harness:24} rule={h.rule} since {iso_ms(h.created_at)} "
            f"(seq {h.created_seq})  {state}\n       {h.reason}"
        )
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.store.db import connect
    from engine.views.holds import release_hold

    hold = release_hold(connect(_existing_store(args)), args.hold_id, reason=args.reason)
    if args.json:
        print_json({"ok": True, "hold": hold.to_json()})
    else:
        print(
            f"released hold {hold.id} on {hold.harness} (rule {hold.rule}): {hold.release_reason}"
        )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.rules.authority.holds import check_admission
    from engine.store.db import connect

    result = check_admission(connect(_existing_store(args)), args.harness)
    if args.json:
        print_json(
            {
                "ok": True,
                "harness": args.harness,
                "held": result.held,
                "skip_reason": result.skip_reason,
                "message": result.message(),
                "holds": [h.to_json() for h in result.holds],
            }
        )
    else:
        print(result.message())
    return EXIT_HELD if result.held else 0
