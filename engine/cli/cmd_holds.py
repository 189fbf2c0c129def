"""``harness holds list | release HOLD_ID [--reason TEXT] | check HARNESS``.

``check`` is what a supervisor calls before admitting a run: exit 0 when the
harness is free, 3 when a rule hold refuses it (skip reason ``rule_hold``),
with the reason on stdout. Exit 3 is distinct from 1 (a failed check) and 2
(bad input) so a supervisor can never mistake "held" for "broken".
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXIT_HELD = 3


def register(sub: Any) -> None:
    p = sub.add_parser("holds", help="List, check and release rule holds.")
    hs = p.add_subparsers(title="holds commands", metavar="COMMAND")

    lp = hs.add_parser("list", help="List active holds (--all: released ones too).")
    lp.add_argument("--store", metavar="PATH")
    lp.add_argument("--all", action="store_true", help="include released holds")
    lp.add_argument("--json", action="store_true")
    lp.set_defaults(handler=cmd_list)

    rp = hs.add_parser("release", help="Release a hold by hand, with a reason.")
    rp.add_argument("hold_id", metavar="HOLD_ID", type=int)
    rp.add_argument("--reason", metavar="TEXT", default="")
    rp.add_argument("--store", metavar="PATH")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(handler=cmd_release)

    cp = hs.add_parser(
        "check",
        help="Exit 0 if HARNESS may start a run, 3 if a rule hold refuses it.",
    )
    cp.add_argument("harness", metavar="HARNESS")
    cp.add_argument("--store", metavar="PATH")
    cp.add_argument("--json", action="store_true")
    cp.set_defaults(handler=cmd_check)
    p.set_defaults(handler=lambda a: (p.print_help(), 2)[1])


def _store(args: argparse.Namespace) -> Path:
    from engine.config import resolve_store

    return resolve_store(args.store)


def cmd_list(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.rules.holds import iso_ms, list_holds
    from engine.store.db import connect

    path = _store(args)
    holds = [] if not path.exists() else list_holds(connect(path), include_released=args.all)
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
    from engine.errors import InputError
    from engine.rules.holds import release_by_operator
    from engine.rules.lease import wall_ms
    from engine.store.db import connect

    path = _store(args)
    if not path.exists():
        raise InputError(f"{path}: no store here, so no hold {args.hold_id}", title="No store")
    conn = connect(path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        hold = release_by_operator(
            conn, args.hold_id, reason=args.reason or "released by operator", now_ms=wall_ms()
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if args.json:
        print_json({"ok": True, "hold": hold.to_json()})
    else:
        print(
            f"released hold {hold.id} on {hold.harness} (rule {hold.rule}): {hold.release_reason}"
        )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.rules.holds import check_admission
    from engine.store.db import connect

    path = _store(args)
    if not path.exists():
        msg = f"{args.harness}: free (no store at {path}, so no holds)"
        if args.json:
            print_json({"ok": True, "harness": args.harness, "held": False, "message": msg})
        else:
            print(msg)
        return 0
    result = check_admission(connect(path), args.harness)
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
