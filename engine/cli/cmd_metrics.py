"""``harness metrics``: the store's figures in Prometheus text exposition format.

Meant for a node-exporter textfile collector or a scrape wrapper; every figure
is read from the store, so it reports the same numbers whichever process
(console or ``harness evaluate``) is evaluating.
"""

from __future__ import annotations

import argparse
import sys


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH")


def cmd_metrics(args: argparse.Namespace) -> int:
    import sqlite3

    from engine.config import resolve_store
    from engine.errors import InputError
    from engine.rules.metrics import collect, render_prometheus

    store = resolve_store(args.store)
    if not store.exists():
        raise InputError(f"{store}: no store here", title="No store")
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        text = render_prometheus(collect(conn))
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{store}: not a usable store: {exc}", title="Bad store") from None
    sys.stdout.write(text)
    return 0
