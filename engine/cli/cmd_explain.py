"""``harness rules explain FIRE_ID``: why a fire happened, recomputed from the journal.

It opens the store read-only: an explanation only ever reads history, and a
stored result the journal no longer reproduces is exit 1.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys

from engine.cli.common import EXIT_FAILED, EXIT_OK, print_json
from engine.cli.options import MAX_ID, int_in
from engine.config import load_config, resolve_store
from engine.errors import InputError


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("fire_id", metavar="FIRE_ID", type=int_in(1, MAX_ID))
    p.add_argument("--json", action="store_true")
    p.add_argument("--store", metavar="PATH")


def cmd_explain(args: argparse.Namespace) -> int:
    from engine.rules.evaluation.fire_explain import explain_fire
    from engine.store.db import connect

    config = load_config()
    conn = connect(resolve_store(getattr(args, "store", None), config), readonly=True)
    try:
        try:
            explanation = explain_fire(conn, int(args.fire_id))
        except sqlite3.Error as exc:
            raise InputError(
                f"cannot read fires from this store: {exc}", title="Bad store"
            ) from None
    finally:
        conn.close()
    if args.json:
        print_json(explanation.to_json())
    else:
        sys.stdout.write(explanation.render_text() + "\n")
    # A stored result the journal no longer reproduces is a failed check.
    return EXIT_OK if explanation.consistent else EXIT_FAILED
